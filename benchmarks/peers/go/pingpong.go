//go:build ignore

// pingpong peer: two goroutines bounce an int over two unbuffered channels
// N times (default 1,000,000 round trips). Metric: ns per round trip.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"time"
)

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	n := flag.Int("n", 1000000, "round trips")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	for rep := 0; rep < *warmup+*reps; rep++ {
		ping, pong := make(chan int), make(chan int)
		done := make(chan bool)
		go func() {
			for i := 0; i < *n; i++ {
				pong <- <-ping + 1
			}
			done <- true
		}()
		t0 := time.Now()
		v := 0
		for i := 0; i < *n; i++ {
			ping <- v
			v = <-pong
		}
		dt := time.Since(t0)
		<-done
		if v != *n {
			panic("pingpong: wrong count")
		}
		if rep >= *warmup {
			fmt.Printf("RESULT workload=pingpong impl=go procs=%d ns_per_op=%.3f n=%d\n",
				*procs, float64(dt.Nanoseconds())/float64(*n), *n)
		}
	}
}
