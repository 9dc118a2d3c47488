package pgkit

// SendSize is sendSize, for the test that holds it to what a batch writes.
var SendSize = sendSize
