//go:build race

package pgkit_test

// raceBuild: the race detector's build allocates where the ordinary one
// does not, so allocation counts are looser under it.
const raceBuild = true
