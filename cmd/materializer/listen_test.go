package main

import (
	"net"
	"sync"
	"testing"
)

// silentServer is a TCP listener standing in for a MongoDB server that
// accepts connections and never answers: a command connecting to it is
// seen (dialed closes once the first connection arrives) and then waits
// in the driver's handshake, as with an unreachable server.
type silentServer struct {
	addr   string
	dialed chan struct{}
}

func newSilentServer(t *testing.T) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{addr: ln.Addr().String(), dialed: make(chan struct{})}
	var (
		once  sync.Once
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			once.Do(func() { close(s.dialed) })
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return s
}

// wasDialed reports whether a connection has arrived.
func (s *silentServer) wasDialed() bool {
	select {
	case <-s.dialed:
		return true
	default:
		return false
	}
}
