/* check/headers.c is compiled by ffi/build.sh with the hand-written header and
 * the one the Go toolchain generated in one translation unit: any prototype
 * that differs between them is a "conflicting types" error, so the build
 * fails when include/goindex.h and the exports disagree. */
#include "goindex.h"
#include "libgoindex.h"
