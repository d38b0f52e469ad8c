//go:build ignore

// udp_echo peer: round-trip latency over loopback UDP with package net.
// One echo server goroutine on one socket (ReadFrom, WriteTo back to the
// sender) and -conns client goroutines, each with its own connected socket
// (net.Dial("udp")), each doing -n round trips: send a -size byte datagram
// (default 64), wait for its echo. Every round trip is timed on its own; a
// lost datagram is resent after a 1 s read deadline and counted. Metric:
// the median round trip in ns over all clients' round trips of one
// repetition; p99_ns, the round trips per second and the resends as extras.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func serve(pc net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		pc.WriteTo(buf[:n], from)
	}
}

func client(addr string, n, size int, out []int64, resends *atomic.Uint64) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		panic(err)
	}
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = 'x'
	}
	back := make([]byte, size+1)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		for {
			if _, err := c.Write(msg); err != nil {
				panic(err)
			}
			c.SetReadDeadline(time.Now().Add(time.Second))
			_, err := c.Read(back)
			if err == nil {
				break
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				panic(err)
			}
			resends.Add(1)
		}
		out[i] = int64(time.Since(t0))
	}
	c.Close()
}

func main() {
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	reps := flag.Int("reps", 3, "measured repetitions")
	warmup := flag.Int("warmup", 1, "unreported repetitions")
	conns := flag.Int("conns", 1, "client sockets")
	n := flag.Int("n", 20000, "round trips per client")
	size := flag.Int("size", 64, "datagram bytes")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	if *conns < 1 {
		*conns = 1
	}
	srv, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := srv.LocalAddr().String()
	go serve(srv)
	lat := make([]int64, *conns**n)
	for rep := 0; rep < *warmup+*reps; rep++ {
		var resends atomic.Uint64
		var wg sync.WaitGroup
		wg.Add(*conns)
		t0 := time.Now()
		for i := 0; i < *conns; i++ {
			go func(i int) {
				client(addr, *n, *size, lat[i**n:(i+1)**n], &resends)
				wg.Done()
			}(i)
		}
		wg.Wait()
		dt := time.Since(t0)
		if rep < *warmup {
			continue
		}
		sorted := append([]int64(nil), lat...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		med := sorted[int(0.5*float64(len(sorted)-1))]
		p99 := sorted[int(0.99*float64(len(sorted)-1))]
		fmt.Printf("RESULT workload=udp_echo impl=go procs=%d median_ns=%d.000 p99_ns=%d conns=%d n=%d size=%d round_trips_per_s=%.3f resends=%d\n",
			*procs, med, p99, *conns, *n, *size, float64(*conns**n)/dt.Seconds(), resends.Load())
	}
	srv.Close()
}
