// test/bin/go_heap.go: how test/bin/go.heap.pb.gz was made, a Go heap
// profile (pprof, gzipped) for malloc-prof's pprof reader:
//
//	go run go_heap.go go.heap.pb.gz
//
// Every allocation is sampled (MemProfileRate 1) and the kept slices
// stay live: allocBig holds 64 x 16 KiB, allocSmall 100 x 1 KiB.
package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

var keep [][]byte

//go:noinline
func allocBig() {
	for i := 0; i < 64; i++ {
		keep = append(keep, make([]byte, 16384))
	}
}

//go:noinline
func allocSmall() {
	for i := 0; i < 100; i++ {
		keep = append(keep, make([]byte, 1024))
	}
}

func main() {
	runtime.MemProfileRate = 1
	allocBig()
	allocSmall()
	runtime.GC()
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		panic(err)
	}
	f.Close()
	runtime.KeepAlive(keep)
}
