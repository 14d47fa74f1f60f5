module github.com/goindex/goindex

go 1.26.0

require (
	github.com/peterbourgon/ff/v3 v3.4.0
	github.com/zeebo/xxh3 v1.1.0
)

require (
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
