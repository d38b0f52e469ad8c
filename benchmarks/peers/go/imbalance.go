//go:build ignore

// imbalance peer: one spawner goroutine spawns T goroutines (default
// 20,000), each a calibrated busy spin of ~50 us (the same recurrence as
// benchmarks/bench_common.hpp's spin()).
// Metric: efficiency_pct = 100 * T * single_task_ns / (wall * procs), the
// single-task time measured serially before and after the parallel run.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var sink uint64

func spin(iters uint64) uint64 {
	x := uint64(88172645463325252)
	for i := uint64(0); i < iters; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

func consume(v uint64) { atomic.AddUint64(&sink, v) }

func calibrate(us float64) uint64 {
	best := 1e30
	for round := 0; round < 3; round++ {
		n := uint64(1024)
		for {
			t0 := time.Now()
			consume(spin(n))
			dt := time.Since(t0)
			if dt >= 20*time.Millisecond {
				per := float64(dt.Nanoseconds()) / float64(n)
				if per < best {
					best = per
				}
				break
			}
			n *= 2
		}
	}
	it := uint64(us * 1000 / best)
	if it == 0 {
		it = 1
	}
	return it
}

func measureTask(iters uint64, count int) float64 {
	t0 := time.Now()
	for i := 0; i < count; i++ {
		consume(spin(iters))
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(count)
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	tasks := flag.Int("tasks", 20000, "tasks")
	taskUs := flag.Float64("task-us", 50, "spin per task, microseconds")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	iters := calibrate(*taskUs)
	for rep := 0; rep < *warmup+*reps; rep++ {
		before := measureTask(iters, 2000)
		var wg sync.WaitGroup
		wg.Add(*tasks)
		t0 := time.Now()
		go func() {
			for i := 0; i < *tasks; i++ {
				go func() {
					consume(spin(iters))
					wg.Done()
				}()
			}
		}()
		wg.Wait()
		dt := time.Since(t0)
		after := measureTask(iters, 2000)
		single := (before + after) / 2
		eff := 100 * float64(*tasks) * single / (float64(dt.Nanoseconds()) * float64(*procs))
		if rep >= *warmup {
			fmt.Printf("RESULT workload=imbalance impl=go procs=%d efficiency_pct=%.3f task_us=%.3f wall_ms=%.3f tasks=%d\n",
				*procs, eff, single/1000, float64(dt.Nanoseconds())/1e6, *tasks)
		}
	}
}
