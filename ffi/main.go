package main

// Dynamo's worker-selector plugin ABI: its C descriptor, callbacks and
// goindex_worker_costs are linked into the library from their own package.
import _ "github.com/goindex/goindex/ffi/wsplugin"

// main is never run: this package is built with -buildmode=c-shared, and
// the host calls the goindex_* exports.
func main() {}
