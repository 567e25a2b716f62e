package cache_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/normal-oj/noj-materializer/materialize"
)

// flakyRedis is a minimal RESP server (no redis-server needed): it
// answers HELLO with an error (the client falls back to RESP2), DEL with
// an error failDels times and then with the number of keys, anything
// else with OK. It counts the DELs.
type flakyRedis struct {
	mu       sync.Mutex
	failDels int
	dels     int
}

func (s *flakyRedis) serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.conn(c)
		}
	}()
	return ln.Addr().String()
}

func (s *flakyRedis) conn(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		reply := "+OK\r\n"
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			reply = "-ERR unknown command 'HELLO'\r\n"
		case "PING":
			reply = "+PONG\r\n"
		case "DEL":
			s.mu.Lock()
			s.dels++
			if s.dels <= s.failDels {
				reply = "-ERR LOADING Redis is loading the dataset in memory\r\n"
			} else {
				reply = fmt.Sprintf(":%d\r\n", len(args)-1)
			}
			s.mu.Unlock()
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	args := make([]string, n)
	for i := range args {
		if _, err := r.ReadString('\n'); err != nil { // $len
			return nil, err
		}
		arg, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		args[i] = strings.TrimSuffix(arg, "\r\n")
	}
	return args, nil
}

// TestRedisInvalidateRetries: Invalidate tries a failing DEL up to
// Attempts times in all (3 by default): two failures and a success
// delete the keys, counted once as deletes and twice as failures; with
// every try failing it gives up after the last.
func TestRedisInvalidateRetries(t *testing.T) {
	pairs := []materialize.Pair{{User: "alice", Problem: 1}, {User: "bob", Problem: 2}}
	for _, c := range []struct {
		name              string
		failDels          int
		wantDels          int
		deletes, failures float64
	}{
		{"two failures, then a success", 2, 3, 2, 2},
		{"every try fails", 5, 3, 0, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &flakyRedis{failDels: c.failDels}
			r, m := redisNew(t, "redis://"+srv.serve(t)+"/0")
			r.Timeout = time.Minute // the tries are bounded by Attempts here, not by time
			r.Invalidate(context.Background(), pairs)
			srv.mu.Lock()
			dels := srv.dels
			srv.mu.Unlock()
			if dels != c.wantDels || r.Attempts != 3 {
				t.Errorf("%d DELs with Attempts %d, want %d", dels, r.Attempts, c.wantDels)
			}
			if got := testutil.ToFloat64(m.CacheDeletes); got != c.deletes {
				t.Errorf("deletes counted %v, want %v", got, c.deletes)
			}
			if got := testutil.ToFloat64(m.CacheFailures); got != c.failures {
				t.Errorf("failures counted %v, want %v", got, c.failures)
			}
		})
	}
}
