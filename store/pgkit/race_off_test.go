//go:build !race

package pgkit_test

const raceBuild = false
