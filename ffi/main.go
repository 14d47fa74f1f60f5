package main

// main is never run: this package is built with -buildmode=c-shared, and
// the host calls the goindex_* exports.
func main() {}
