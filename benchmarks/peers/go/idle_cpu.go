//go:build ignore

// idle_cpu peer: GOMAXPROCS=2; some goroutines run, then main blocks on a
// WaitGroup that another goroutine releases after -ms (default 1000) ms of
// time.Sleep. Process CPU (getrusage, user + system) over that window.
// Metric: cpu_pct = 100 * cpu_time / wall (percent of one core).
package main

import (
	"flag"
	"fmt"
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

func spin(iters uint64) uint64 {
	x := uint64(88172645463325252)
	for i := uint64(0); i < iters; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

var sink uint64

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 0, "unreported repetitions")
	ms := flag.Int("ms", 1000, "idle window, milliseconds")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	var mu sync.Mutex
	for rep := 0; rep < *warmup+*reps; rep++ {
		var busy sync.WaitGroup
		busy.Add(100)
		for i := 0; i < 100; i++ {
			go func() {
				v := spin(10000)
				mu.Lock()
				sink += v
				mu.Unlock()
				busy.Done()
			}()
		}
		busy.Wait()
		var idle sync.WaitGroup
		idle.Add(1)
		var pct, wallMs float64
		go func() {
			c0, t0 := cpuNs(), time.Now()
			time.Sleep(time.Duration(*ms) * time.Millisecond)
			c1, dt := cpuNs(), time.Since(t0)
			pct = 100 * float64(c1-c0) / float64(dt.Nanoseconds())
			wallMs = float64(dt.Nanoseconds()) / 1e6
			idle.Done()
		}()
		idle.Wait()
		if rep >= *warmup {
			fmt.Printf("RESULT workload=idle_cpu impl=go procs=%d cpu_pct=%.3f wall_ms=%.3f\n", *procs, pct, wallMs)
		}
	}
}
