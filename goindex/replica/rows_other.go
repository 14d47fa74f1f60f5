//go:build !amd64

package replica

// nativeKernels returns the portable row kernels: there is no assembly
// outside amd64.
func nativeKernels() rowKernels { return goKernels }

// storeColumn is storeColumnGo outside amd64.
func storeColumn(rows []uint64, start, stride int, words []uint64) {
	storeColumnGo(rows, start, stride, words)
}
