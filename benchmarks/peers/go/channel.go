//go:build ignore

// channel peer: P producers send N ints in total (default 10,000,000) over
// one buffered channel (capacity 128) to C consumers. Metric: ns per item.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	n := flag.Int64("n", 10000000, "items")
	np := flag.Int64("producers", 1, "producers")
	nc := flag.Int64("consumers", 1, "consumers")
	capacity := flag.Int("cap", 128, "channel capacity")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	for rep := 0; rep < *warmup+*reps; rep++ {
		ch := make(chan int64, *capacity)
		var producers, consumers sync.WaitGroup
		var total int64
		t0 := time.Now()
		producers.Add(int(*np))
		consumers.Add(int(*nc))
		for p := int64(0); p < *np; p++ {
			go func(p int64) {
				lo, hi := *n*p / *np, *n*(p+1) / *np
				for i := lo; i < hi; i++ {
					ch <- i
				}
				producers.Done()
			}(p)
		}
		for k := int64(0); k < *nc; k++ {
			go func() {
				var sum int64
				for v := range ch {
					sum += v
				}
				atomic.AddInt64(&total, sum)
				consumers.Done()
			}()
		}
		producers.Wait()
		close(ch)
		consumers.Wait()
		dt := time.Since(t0)
		if total != *n*(*n-1)/2 {
			panic("channel: wrong sum")
		}
		if rep >= *warmup {
			fmt.Printf("RESULT workload=channel impl=go procs=%d ns_per_op=%.3f n=%d producers=%d consumers=%d\n",
				*procs, float64(dt.Nanoseconds())/float64(*n), *n, *np, *nc)
		}
	}
}
