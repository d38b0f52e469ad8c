//go:build ignore

// tail_latency peer: GOMAXPROCS=procs; the main goroutine reads a 1 ms
// time.Ticker for -ms milliseconds and records each tick's lag (receipt
// time minus the tick's due time on the grid t0 + k ms; after a late tick
// the next due time is the next grid point after the receipt) while -hogs
// goroutines (default 2 x procs) run a tight computation loop without any
// call (Go preempts them asynchronously). Metric: p99_us (extra: p50_us,
// max_us, ticks). -async is accepted and ignored (goro's variant flag).
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

const period = time.Millisecond

var sink uint64

func percentile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(q*float64(len(s)-1) + 0.5)
	if i > len(s)-1 {
		i = len(s) - 1
	}
	return s[i]
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	ms := flag.Int("ms", 1000, "measured milliseconds per repetition")
	hogs := flag.Int("hogs", 0, "CPU hogs (default 2 x procs)")
	flag.Int("async", 0, "ignored (goro's variant)")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	if *hogs == 0 {
		*hogs = 2 * *procs
	}
	for rep := 0; rep < *warmup+*reps; rep++ {
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(*hogs)
		for h := 0; h < *hogs; h++ {
			go func() {
				// The same dependent multiply-add chain as bench::spin, one
				// loop with no call in it.
				x := uint64(88172645463325252)
				for !stop.Load() {
					for i := 0; i < 500; i++ {
						x = x*6364136223846793005 + 1442695040888963407
					}
				}
				atomic.AddUint64(&sink, x)
				wg.Done()
			}()
		}
		lags := make([]float64, 0, *ms+16)
		t0 := time.Now()
		tick := time.NewTicker(period)
		due := t0.Add(period)
		end := t0.Add(time.Duration(*ms) * time.Millisecond)
		for {
			<-tick.C
			r := time.Now()
			lag := r.Sub(due)
			if lag < 0 {
				lag = 0
			}
			lags = append(lags, float64(lag.Nanoseconds())/1e3)
			due = due.Add(period)
			if !due.After(r) { // ticks dropped meanwhile
				due = t0.Add((r.Sub(t0)/period + 1) * period)
			}
			if !r.Before(end) {
				break
			}
		}
		tick.Stop()
		stop.Store(true)
		wg.Wait()
		if rep >= *warmup {
			max := 0.0
			for _, l := range lags {
				if l > max {
					max = l
				}
			}
			fmt.Printf("RESULT workload=tail_latency impl=go procs=%d p99_us=%.3f p50_us=%.3f max_us=%.3f ticks=%d hogs=%d\n",
				*procs, percentile(lags, 0.99), percentile(lags, 0.5), max, len(lags), *hogs)
		}
	}
}
