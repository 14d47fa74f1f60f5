//go:build !amd64

package replica

// nativeKernels returns the portable row kernels: there is no assembly
// outside amd64.
func nativeKernels() rowKernels { return goKernels }
