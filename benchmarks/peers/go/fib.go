//go:build ignore

// fib peer: fib(27) spawn tree, the same shape as benchmarks/fib.cpp: one
// goroutine for fib(n-1), fib(n-2) inline, wait on a sync.WaitGroup.
// Metric: ns per task = wall / goroutines spawned.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

func fib(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	var x uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		x = fib(n - 1)
		wg.Done()
	}()
	y := fib(n - 2)
	wg.Wait()
	return x + y
}

func fibSerial(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	return fibSerial(n-1) + fibSerial(n-2)
}

// spawns(n): tasks spawned by fib(n) = 1 + spawns(n-1) + spawns(n-2), 0 for n < 2.
func spawns(n int) uint64 {
	var a, b uint64
	if n < 2 {
		return 0
	}
	for k := 2; k <= n; k++ {
		a, b = b, 1+a+b
	}
	return b
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	depth := flag.Int("depth", 27, "fib argument")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	tasks := spawns(*depth)
	expect := fibSerial(*depth)
	for rep := 0; rep < *warmup+*reps; rep++ {
		t0 := time.Now()
		r := fib(*depth)
		dt := time.Since(t0)
		if r != expect {
			fmt.Fprintln(os.Stderr, "fib: wrong result")
			os.Exit(1)
		}
		if rep >= *warmup {
			fmt.Printf("RESULT workload=fib impl=go procs=%d ns_per_op=%.3f depth=%d tasks=%d\n",
				*procs, float64(dt.Nanoseconds())/float64(tasks), *depth, tasks)
		}
	}
}
