//go:build ignore

// spawn peer: N goroutines (default 1,000,000) that each call wg.Done() on
// one sync.WaitGroup; main spawns them all, then waits. GOMAXPROCS = -procs.
// Metric: ns per goroutine.
//
//	go build -o spawn spawn.go && ./spawn -procs 2
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"time"
)

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	n := flag.Int("n", 1000000, "goroutines")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	for rep := 0; rep < *warmup+*reps; rep++ {
		var wg sync.WaitGroup
		wg.Add(*n)
		t0 := time.Now()
		for i := 0; i < *n; i++ {
			go func() { wg.Done() }()
		}
		wg.Wait()
		dt := time.Since(t0)
		if rep >= *warmup {
			fmt.Printf("RESULT workload=spawn impl=go procs=%d ns_per_op=%.3f n=%d\n",
				*procs, float64(dt.Nanoseconds())/float64(*n), *n)
		}
	}
}
