//go:build ignore

// mutex peer: G goroutines (default 64) each lock and unlock one
// sync.Mutex M times (default 20,000), incrementing a shared counter inside
// and doing W dependent multiply-adds (default 20) outside. Metric: ns per
// Lock/Unlock pair = wall / (G * M).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	g := flag.Int("goroutines", 64, "goroutines")
	m := flag.Int("iters", 20000, "lock/unlock pairs per goroutine")
	w := flag.Int("work", 20, "multiply-adds between pairs")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	for rep := 0; rep < *warmup+*reps; rep++ {
		var mu sync.Mutex
		var counter uint64
		var wg sync.WaitGroup
		wg.Add(*g)
		t0 := time.Now()
		for i := 0; i < *g; i++ {
			go func(i int) {
				x := uint64(i + 1)
				for k := 0; k < *m; k++ {
					mu.Lock()
					counter++
					mu.Unlock()
					for j := 0; j < *w; j++ {
						x = x*6364136223846793005 + 1442695040888963407
					}
				}
				if x == 0 {
					fmt.Println()
				}
				wg.Done()
			}(i)
		}
		wg.Wait()
		dt := time.Since(t0)
		if counter != uint64(*g)*uint64(*m) {
			os.Exit(1)
		}
		if rep >= *warmup {
			fmt.Printf("RESULT workload=mutex impl=go procs=%d ns_per_op=%.3f goroutines=%d iters=%d\n",
				*procs, float64(dt.Nanoseconds())/float64(*g**m), *g, *m)
		}
	}
}
