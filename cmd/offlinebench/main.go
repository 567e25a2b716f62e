// Command offlinebench measures the offline verify and rebuild against
// their physical floor (make bench-offline): it seeds university-shape
// dumps of the given sizes (reused when present), runs each measurement as
// a child process and reads its CPU time (user+sys) and peak RSS from
// getrusage, next to a floor reader of the same files run in the same
// invocation, and prints the ratios. It also runs the online rebuild's
// memstore benchmark (watch.BenchmarkRebuild) at a base revision and at
// the working tree, for the CPU per submission before and after.
//
//	offlinebench run [--dir DIR] [--sizes 100000,1000000,3000000] [--bin bin/materializer] [--base REV]
//	offlinebench floor --dump DIR [--out DIR]
package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: offlinebench run|floor [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "floor":
		fs := flag.NewFlagSet("floor", flag.ExitOnError)
		dir := fs.String("dump", "", "dump directory (flat)")
		out := fs.String("out", "", "write the output bytes here (rebuild floor)")
		_ = fs.Parse(os.Args[2:])
		var sum uint64
		sum, err = floor(*dir, *out)
		if err == nil {
			fmt.Printf("checksum %d\n", sum)
		}
	case "run":
		err = run(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "offlinebench:", err)
		os.Exit(1)
	}
}

// usage is one child process's resource use.
type usage struct {
	cpu  time.Duration // user + sys
	rss  int64         // peak resident set, bytes
	wall time.Duration
}

// measure runs a command and returns its rusage; a non-zero exit is an
// error unless allowed.
func measure(allowExit1 bool, name string, args ...string) (usage, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var ee *exec.ExitError
	if errors.As(err, &ee) && allowExit1 && ee.ExitCode() == 1 {
		err = nil
	}
	if err != nil {
		return usage{}, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return usage{cpu: cpu, rss: ru.Maxrss * 1024, wall: wall}, nil // Maxrss is in KiB on Linux
}

// shape of the seeded dumps: Normal-OJ's university shape, the catalog
// fixed, the submissions growing.
var seedArgs = []string{"--shape", "university", "--users", "20000", "--course-size", "80", "--homeworks", "2000", "--problems", "5000", "--seed", "1"}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	dir := fs.String("dir", filepath.Join(os.TempDir(), "noj-offline-bench"), "where the dumps are kept (reused when present)")
	sizes := fs.String("sizes", "100000,1000000,3000000", "submission counts")
	bin := fs.String("bin", "bin/materializer", "the materializer binary")
	base := fs.String("base", "", "git revision for the online rebuild benchmark's before figure (none: skip)")
	reps := fs.Int("reps", 5, "runs of each side per size (alternating); the table shows the medians")
	_ = fs.Parse(args)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("offline benchmark: %s, %d CPUs, %s, load average at start: %s", host, runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339), load)
	fmt.Printf("dumps: university shape %s\n\n", strings.Join(seedArgs, " "))
	var baseBin string
	if *base != "" {
		var err error
		if baseBin, err = buildBase(*dir, *base); err != nil {
			return err
		}
	}
	if *reps < 1 {
		return fmt.Errorf("--reps %d: at least 1", *reps)
	}
	var before, samples []string
	fmt.Printf("each size: its files read once to warm the page cache, then %d rounds of floor, verify, floor+write, rebuild; CPU = user+sys of the child (getrusage), median over the rounds; ratio = median / median; peak RSS = largest over the rounds\n\n", *reps)
	fmt.Println("| submissions | floor (read) | verify --dump | ratio | verify peak RSS | floor (read+write) | rebuild --dump --out | ratio | rebuild peak RSS |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	var rssByN []struct {
		n      int
		vr, rr int64
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--sizes: %w", err)
		}
		d := filepath.Join(*dir, fmt.Sprintf("university-%d", n))
		if _, err := os.Stat(d); err != nil {
			tmp := d + ".seeding"
			_ = os.RemoveAll(tmp)
			if _, err := measure(false, *bin, append(append([]string{"seed"}, seedArgs...), "--submissions", strconv.Itoa(n), "--out", tmp)...); err != nil {
				return err
			}
			if err := os.Rename(tmp, d); err != nil {
				return err
			}
		}
		outs := filepath.Join(*dir, "out")
		_ = os.RemoveAll(outs)
		if err := warm(d); err != nil {
			return err
		}
		// Floor and command alternate, so a change of the machine's load
		// or of the cache during the run affects both sides alike.
		var fvs, vs, frs, rs []usage
		for range *reps {
			fv, err := measure(false, self, "floor", "--dump", d)
			if err != nil {
				return err
			}
			v, err := measure(true, *bin, "verify", "--dump", d, "--quiet", "--max-diffs", "0")
			if err != nil {
				return err
			}
			fr, err := measure(false, self, "floor", "--dump", d, "--out", filepath.Join(outs, "floor"))
			if err != nil {
				return err
			}
			clean(outs)
			r, err := measure(false, *bin, "rebuild", "--dump", d, "--out", filepath.Join(outs, "rebuild"), "--quiet", "--max-diffs", "0")
			if err != nil {
				return err
			}
			clean(outs)
			fvs, vs, frs, rs = append(fvs, fv), append(vs, v), append(frs, fr), append(rs, r)
		}
		fv, v, fr, r := medianOf(fvs), medianOf(vs), medianOf(frs), medianOf(rs)
		samples = append(samples, fmt.Sprintf("| %d | %s | %s | %s | %s |", n, cpus(fvs), cpus(vs), cpus(frs), cpus(rs)))
		_ = os.RemoveAll(outs)
		if baseBin != "" && n <= 1_000_000 {
			bv, err := measure(true, baseBin, "verify", "--dump", d, "--max-diffs", "0")
			if err != nil {
				return err
			}
			br, err := measure(false, baseBin, "rebuild", "--dump", d, "--out", filepath.Join(outs, "base"), "--max-diffs", "0")
			if err != nil {
				return err
			}
			_ = os.RemoveAll(outs)
			before = append(before, fmt.Sprintf("| %d | %.2f s (%.2fx floor) | %d MB | %.2f s (%.2fx floor) | %d MB |", n,
				bv.cpu.Seconds(), bv.cpu.Seconds()/fv.cpu.Seconds(), bv.rss>>20, br.cpu.Seconds(), br.cpu.Seconds()/fr.cpu.Seconds(), br.rss>>20))
		}
		fmt.Printf("| %d | %.2f s | %.2f s | **%.2fx** | %d MB | %.2f s | %.2f s | **%.2fx** | %d MB |\n", n,
			fv.cpu.Seconds(), v.cpu.Seconds(), v.cpu.Seconds()/fv.cpu.Seconds(), v.rss>>20,
			fr.cpu.Seconds(), r.cpu.Seconds(), r.cpu.Seconds()/fr.cpu.Seconds(), r.rss>>20)
		rssByN = append(rssByN, struct {
			n      int
			vr, rr int64
		}{n, v.rss, r.rss})
	}
	for i := 1; i < len(rssByN); i++ {
		a, b := rssByN[i-1], rssByN[i]
		per := float64(b.n-a.n) / 1e6
		fmt.Printf("\npeak RSS growth %d → %d submissions: verify %.0f MB, rebuild %.0f MB per extra million", a.n, b.n,
			float64(b.vr-a.vr)/per/(1<<20), float64(b.rr-a.rr)/per/(1<<20))
	}
	fmt.Println()
	fmt.Println("\nCPU seconds of every round, in order (floor read | verify | floor read+write | rebuild):")
	fmt.Println("| submissions | floor (read) | verify --dump | floor (read+write) | rebuild --dump --out |")
	fmt.Println("|---|---|---|---|---|")
	for _, l := range samples {
		fmt.Println(l)
	}
	if len(before) > 0 {
		fmt.Printf("\nthe same offline commands at %s (the dump loaded into memstore), sizes up to 1M:\n", *base)
		fmt.Println("| submissions | verify --dump CPU | peak RSS | rebuild --dump --out CPU | peak RSS |")
		fmt.Println("|---|---|---|---|---|")
		for _, l := range before {
			fmt.Println(l)
		}
	}
	if *base != "" {
		return onlineBench(*dir, *base)
	}
	return nil
}

// warm reads every file of dump directory d once, so the measured runs
// all find it in the page cache (the first run after seeding or after
// other work would otherwise pay for the disk, and only on one side).
func warm(d string) error {
	entries, err := os.ReadDir(d)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		f, err := os.Open(filepath.Join(d, e.Name()))
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		f.Close()
		if err != nil {
			return fmt.Errorf("warm %s: %w", e.Name(), err)
		}
	}
	return nil
}

// clean removes the outputs of a round and flushes what is still dirty,
// so the writeback of one run does not land in the next one's time.
func clean(outs string) {
	_ = os.RemoveAll(outs)
	syscall.Sync()
}

// medianOf returns the run with the median CPU (the upper one of an even
// count), with the peak RSS raised to the largest of all runs.
func medianOf(us []usage) usage {
	s := slices.Clone(us)
	slices.SortFunc(s, func(a, b usage) int { return cmp.Compare(a.cpu, b.cpu) })
	m := s[len(s)/2]
	for _, u := range us {
		m.rss = max(m.rss, u.rss)
	}
	return m
}

// cpus lists the CPU seconds of runs in order.
func cpus(us []usage) string {
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = fmt.Sprintf("%.2f", u.cpu.Seconds())
	}
	return strings.Join(parts, " ")
}

// baseSource unpacks revision base (git archive) under dir once.
func baseSource(dir, base string) (string, error) {
	baseDir := filepath.Join(dir, "base-"+base)
	if _, err := os.Stat(baseDir); err == nil {
		return baseDir, nil
	}
	if err := os.MkdirAll(baseDir, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive %s | tar -x -C %s", base, baseDir))
	if out, err := archive.CombinedOutput(); err != nil {
		_ = os.RemoveAll(baseDir)
		return "", fmt.Errorf("git archive %s: %w\n%s", base, err, out)
	}
	return baseDir, nil
}

// buildBase builds the materializer binary of revision base.
func buildBase(dir, base string) (string, error) {
	src, err := baseSource(dir, base)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "materializer-"+base)
	build := exec.Command("go", "build", "-o", bin, "./cmd/materializer")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", base, err, out)
	}
	return bin, nil
}

// onlineBench runs watch.BenchmarkRebuild (1M submissions through
// memstore) built at base and at the working tree, one after the other.
func onlineBench(dir, base string) error {
	baseDir, err := baseSource(dir, base)
	if err != nil {
		return err
	}
	bins := map[string]string{"before (" + base + ")": filepath.Join(dir, "watch-base.test"), "after (working tree)": filepath.Join(dir, "watch-head.test")}
	for label, b := range bins {
		build := exec.Command("go", "test", "-c", "-o", b, "./watch/")
		if strings.HasPrefix(label, "before") {
			build.Dir = baseDir
		}
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", label, err, out)
		}
	}
	fmt.Println("\nonline rebuild through memstore (watch.BenchmarkRebuild, 1,000,000 submissions, one op):")
	fmt.Println("| code | time/op (wall) | per submission | allocated/op |")
	fmt.Println("|---|---|---|---|")
	nsRE := regexp.MustCompile(`BenchmarkRebuild\S*\s+\d+\s+(\d+) ns/op.*?(\d+) B/op`)
	var ns []float64
	for _, label := range []string{"before (" + base + ")", "after (working tree)"} {
		cmd := exec.Command(bins[label], "-test.run", "^$", "-test.bench", "^BenchmarkRebuild$", "-test.benchtime", "1x", "-test.benchmem")
		cmd.Dir = "watch"
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", label, err, out)
		}
		m := nsRE.FindSubmatch(out)
		if m == nil {
			return fmt.Errorf("%s: no result in\n%s", label, out)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		alloc, _ := strconv.ParseFloat(string(m[2]), 64)
		ns = append(ns, v)
		fmt.Printf("| %s | %.2f s | %.0f ns | %.0f MB |\n", label, v/1e9, v/1e6, alloc/1e6)
	}
	fmt.Printf("\nonline rebuild time per submission after/before: **%.2fx**\n", ns[1]/ns[0])
	return nil
}
