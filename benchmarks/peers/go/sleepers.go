//go:build ignore

// sleepers peer: GOMAXPROCS=procs; N goroutines (default 100,000) each
// time.Sleep a random 1-10 ms (uniform, fixed seed) then wg.Done(); main
// spawns them all and waits. Metrics: wall_ms (spawn to last wake-up) and
// cpu_ms (process CPU, getrusage user + system, over the same window).
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"syscall"
	"time"
)

func cpuNs() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	n := flag.Int("n", 100000, "goroutines")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	rng := rand.New(rand.NewSource(1))
	durations := make([]time.Duration, *n)
	for i := range durations {
		durations[i] = time.Duration(1000+rng.Intn(9001)) * time.Microsecond
	}
	for rep := 0; rep < *warmup+*reps; rep++ {
		var wg sync.WaitGroup
		wg.Add(*n)
		c0, t0 := cpuNs(), time.Now()
		for i := 0; i < *n; i++ {
			d := durations[i]
			go func() {
				time.Sleep(d)
				wg.Done()
			}()
		}
		wg.Wait()
		dt, dc := time.Since(t0), cpuNs()-c0
		if rep >= *warmup {
			fmt.Printf("RESULT workload=sleepers impl=go procs=%d wall_ms=%.3f cpu_ms=%.3f n=%d\n",
				*procs, float64(dt.Nanoseconds())/1e6, float64(dc)/1e6, *n)
		}
	}
}
