//go:build ignore

// yield peer: G goroutines (default 1,000) each call runtime.Gosched() Y
// times (default 10,000). Metric: ns per Gosched = wall / (G * Y).
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
	g := flag.Int("goroutines", 1000, "goroutines")
	y := flag.Int("yields", 10000, "yields per goroutine")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	for rep := 0; rep < *warmup+*reps; rep++ {
		var wg sync.WaitGroup
		wg.Add(*g)
		t0 := time.Now()
		for i := 0; i < *g; i++ {
			go func() {
				for k := 0; k < *y; k++ {
					runtime.Gosched()
				}
				wg.Done()
			}()
		}
		wg.Wait()
		dt := time.Since(t0)
		if rep >= *warmup {
			fmt.Printf("RESULT workload=yield impl=go procs=%d ns_per_op=%.3f goroutines=%d yields=%d\n",
				*procs, float64(dt.Nanoseconds())/float64(*g**y), *g, *y)
		}
	}
}
