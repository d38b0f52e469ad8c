//go:build ignore

// context_cancel peer: GOMAXPROCS=procs; one parent context, N children
// (default 100,000) from context.WithCancel, each watched by a goroutine in
// select on its child's Done() and a channel nobody sends on. Metric:
// wall_ms from the parent's cancel to the last waiter woken; setup_ms.
package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"time"
)

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int("n", 100000, "children")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	never := make(chan int)
	for rep := 0; rep < *warmup+*reps; rep++ {
		t0 := time.Now()
		parent, cancel := context.WithCancel(context.Background())
		var ready, woken sync.WaitGroup
		ready.Add(*n)
		woken.Add(*n)
		for i := 0; i < *n; i++ {
			child, cancelChild := context.WithCancel(parent)
			go func() {
				ready.Done()
				select {
				case <-child.Done():
				case <-never:
				}
				cancelChild()
				woken.Done()
			}()
		}
		ready.Wait()
		for i := 0; i < 10; i++ {
			runtime.Gosched()
		}
		t1 := time.Now()
		cancel()
		woken.Wait()
		t2 := time.Now()
		if rep >= *warmup {
			fmt.Printf("RESULT workload=context_cancel impl=go procs=%d wall_ms=%.3f setup_ms=%.3f n=%d\n",
				*procs, float64(t2.Sub(t1).Nanoseconds())/1e6, float64(t1.Sub(t0).Nanoseconds())/1e6, *n)
		}
	}
}
