// Command oracle answers version questions with upstream Talos machinery itself
// (github.com/siderolabs/talos/pkg/machinery/compatibility), so the Python port in
// ichor/release can be compared with the real thing, verdict for verdict and word
// for word. It holds no rule of its own: every answer is machinery's or blang/semver's.
//
// Judge mode (no arguments) reads one JSON object per line on stdin and writes one
// JSON object per line on stdout, in order:
//
//	{"op":"upgrade","host":"1.12.0","target":"v1.14.1"}  compatibility.TalosVersion.UpgradeableFrom
//	{"op":"k8s","kubernetes":"1.33.1","talos":"1.14.0"}   compatibility.KubernetesVersion.SupportedWith
//	{"op":"parse","version":"v01.2"}                     semver.ParseTolerant (machinery's parse)
//	{"op":"info"}                                        module version and the minors this build knows
//
// Each answer is {"verdict":"ok"}, {"verdict":"refused","error":<rule's text>} or
// {"verdict":"parse_error","errors":{<field>:<blang/semver's text>}} (every field that
// failed). A line that is not one of these is answered {"verdict":"bad_request",...}.
//
// Printable mode (`oracle printable`) writes one JSON object: the Go version it was built
// with, its Unicode version, and strconv.IsPrint over every code point as ranges of
// consecutive printable runes: the characters %q, and so every blang/semver error,
// writes as they are. `make printable` commits it as ichor/release/go_printable.py.
//
// Bench mode (`oracle bench [-rounds N]`) reads the same upgrade/k8s lines, decodes them
// all first, then judges the whole batch N times (parse and rule, as the Python port does
// from strings) and prints one JSON line with the best and median round in nanoseconds,
// wall clock and process CPU time: process start and JSON input/output are outside the
// measured time.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/blang/semver/v4"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/compatibility"
)

const machineryModule = "github.com/siderolabs/talos/pkg/machinery"

type request struct {
	Op         string `json:"op"`
	Host       string `json:"host"`
	Target     string `json:"target"`
	Kubernetes string `json:"kubernetes"`
	Talos      string `json:"talos"`
	Version    string `json:"version"`
}

type answer struct {
	Verdict    string            `json:"verdict"`
	Error      string            `json:"error,omitempty"`
	Errors     map[string]string `json:"errors,omitempty"`
	Normalised string            `json:"normalised,omitempty"`
}

type info struct {
	Verdict        string   `json:"verdict"`
	Module         string   `json:"module"`
	Version        string   `json:"version"`
	Replaced       string   `json:"replaced,omitempty"`
	GoVersion      string   `json:"go"`
	UpgradeMinors  []string `json:"upgrade_minors"`
	KubernetesWith []string `json:"kubernetes_minors"`
}

func parseTalos(text string) (*compatibility.TalosVersion, error) {
	return compatibility.ParseTalosVersion(&machine.VersionInfo{Tag: text})
}

func upgrade(host, target string) answer {
	errs := map[string]string{}

	t, err := parseTalos(target)
	if err != nil {
		errs["target"] = err.Error()
	}

	h, err := parseTalos(host)
	if err != nil {
		errs["host"] = err.Error()
	}

	if len(errs) > 0 {
		return answer{Verdict: "parse_error", Errors: errs}
	}

	if err := t.UpgradeableFrom(h); err != nil {
		return answer{Verdict: "refused", Error: err.Error()}
	}

	return answer{Verdict: "ok"}
}

func kubernetes(k8s, talos string) answer {
	errs := map[string]string{}

	k, err := compatibility.ParseKubernetesVersion(k8s)
	if err != nil {
		errs["kubernetes"] = err.Error()
	}

	t, err := parseTalos(talos)
	if err != nil {
		errs["talos"] = err.Error()
	}

	if len(errs) > 0 {
		return answer{Verdict: "parse_error", Errors: errs}
	}

	if err := k.SupportedWith(t); err != nil {
		return answer{Verdict: "refused", Error: err.Error()}
	}

	return answer{Verdict: "ok"}
}

func parse(text string) answer {
	v, err := semver.ParseTolerant(text)
	if err != nil {
		return answer{Verdict: "parse_error", Errors: map[string]string{"version": err.Error()}}
	}

	return answer{Verdict: "ok", Normalised: v.String()}
}

// knownMinors asks machinery itself which Talos minors it has rows for, by probing
// 0.0 to 2.40: a minor is known when the rule answers anything but "not supported".
func knownMinors() (upgrades, k8s []string) {
	for major := 0; major <= 2; major++ {
		for minor := 0; minor <= 40; minor++ {
			v := fmt.Sprintf("%d.%d.0", major, minor)
			t, _ := parseTalos(v)

			if err := t.UpgradeableFrom(t); err == nil || !strings.HasPrefix(err.Error(), "upgrades to version") {
				upgrades = append(upgrades, fmt.Sprintf("%d.%d", major, minor))
			}

			k, _ := compatibility.ParseKubernetesVersion("1.0.0")
			if err := k.SupportedWith(t); err == nil || !strings.HasPrefix(err.Error(), "compatibility with version") {
				k8s = append(k8s, fmt.Sprintf("%d.%d", major, minor))
			}
		}
	}

	return upgrades, k8s
}

type printable struct {
	Verdict string    `json:"verdict"`
	Go      string    `json:"go"`
	Unicode string    `json:"unicode"`
	Ranges  [][2]rune `json:"ranges"`
}

// printableTable asks strconv.IsPrint, the test strconv.Quote (%q) applies to each rune,
// about every code point, and groups the printable ones into inclusive ranges.
func printableTable() printable {
	out := printable{Verdict: "ok", Go: runtime.Version(), Unicode: unicode.Version}
	start := rune(-1)

	for r := rune(0); r <= unicode.MaxRune; r++ {
		if strconv.IsPrint(r) {
			if start < 0 {
				start = r
			}

			continue
		}

		if start >= 0 {
			out.Ranges = append(out.Ranges, [2]rune{start, r - 1})
			start = -1
		}
	}

	if start >= 0 {
		out.Ranges = append(out.Ranges, [2]rune{start, unicode.MaxRune})
	}

	return out
}

func describe() info {
	out := info{Verdict: "ok", Module: machineryModule}

	if bi, ok := debug.ReadBuildInfo(); ok {
		out.GoVersion = bi.GoVersion

		for _, dep := range bi.Deps {
			if dep.Path == machineryModule {
				out.Version = dep.Version

				if dep.Replace != nil {
					out.Replaced = dep.Replace.Path
				}
			}
		}
	}

	out.UpgradeMinors, out.KubernetesWith = knownMinors()

	return out
}

func judge(req request) any {
	switch req.Op {
	case "upgrade":
		return upgrade(req.Host, req.Target)
	case "k8s":
		return kubernetes(req.Kubernetes, req.Talos)
	case "parse":
		return parse(req.Version)
	case "info":
		return describe()
	default:
		return answer{Verdict: "bad_request", Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
}

func serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 256*1024)

	w := bufio.NewWriterSize(out, 256*1024)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)

	for {
		line, readErr := r.ReadBytes('\n')
		if readErr != nil && readErr != io.EOF {
			return readErr
		}

		if len(bytes.TrimSpace(line)) > 0 {
			var req request

			var reply any
			if err := json.Unmarshal(line, &req); err != nil {
				reply = answer{Verdict: "bad_request", Error: err.Error()}
			} else {
				reply = judge(req)
			}

			if err := enc.Encode(reply); err != nil {
				return err
			}
		}

		if readErr == io.EOF {
			return w.Flush()
		}

		// Answer at once when no more input is waiting (an interactive caller),
		// batch the writes otherwise.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

type benchResult struct {
	Op       string  `json:"op"`
	Pairs    int     `json:"pairs"`
	Rounds   int     `json:"rounds"`
	BestNs   int64   `json:"best_ns"`
	MedianNs int64   `json:"median_ns"`
	BestCPU  int64   `json:"best_cpu_ns"`
	PerPair  float64 `json:"best_ns_per_pair"`
	Ok       int     `json:"ok"`
	Refused  int     `json:"refused"`
	Invalid  int     `json:"parse_errors"`
	Measured string  `json:"measured"`
}

// judgeOnce runs the rule over the whole batch the way a caller holding strings would:
// parse both sides, then ask machinery; counts are returned so the work cannot be elided.
func judgeOnce(reqs []request) (ok, refused, invalid int) {
	for i := range reqs {
		var err error

		switch reqs[i].Op {
		case "upgrade":
			t, terr := parseTalos(reqs[i].Target)
			h, herr := parseTalos(reqs[i].Host)

			if terr != nil || herr != nil {
				invalid++

				continue
			}

			err = t.UpgradeableFrom(h)
		case "k8s":
			k, kerr := compatibility.ParseKubernetesVersion(reqs[i].Kubernetes)
			t, terr := parseTalos(reqs[i].Talos)

			if kerr != nil || terr != nil {
				invalid++

				continue
			}

			err = k.SupportedWith(t)
		default:
			invalid++

			continue
		}

		if err != nil {
			_ = err.Error() // the message is part of the answer the port builds too

			refused++
		} else {
			ok++
		}
	}

	return ok, refused, invalid
}

// cpuTime is the CPU time of the whole process (every thread, so the GC's too), which a
// busy machine disturbs less than the wall clock.
func cpuTime() int64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}

	return usage.Utime.Nano() + usage.Stime.Nano()
}

func bench(args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	rounds := fs.Int("rounds", 5, "times the whole batch is judged; the best and median are reported")

	if err := fs.Parse(args); err != nil {
		return err
	}

	if *rounds < 1 {
		return fmt.Errorf("-rounds must be at least 1, got %d", *rounds)
	}

	var reqs []request

	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)

	for scanner.Scan() {
		var req request
		if err := json.Unmarshal(scanner.Bytes(), &req); err != nil {
			return fmt.Errorf("line %d: %w", len(reqs)+1, err)
		}

		reqs = append(reqs, req)
	}

	if err := scanner.Err(); err != nil {
		return err
	}

	times := make([]int64, 0, *rounds)
	cpu := make([]int64, 0, *rounds)

	var ok, refused, invalid int

	for range *rounds {
		cpuStart := cpuTime()
		start := time.Now()
		ok, refused, invalid = judgeOnce(reqs)
		times = append(times, time.Since(start).Nanoseconds())
		cpu = append(cpu, cpuTime()-cpuStart)
	}

	slices.Sort(times)
	slices.Sort(cpu)

	op := "mixed"
	if len(reqs) > 0 {
		op = reqs[0].Op
	}

	result := benchResult{
		Op:       op,
		Pairs:    len(reqs),
		Rounds:   *rounds,
		BestNs:   times[0],
		MedianNs: times[len(times)/2],
		BestCPU:  cpu[0],
		Ok:       ok,
		Refused:  refused,
		Invalid:  invalid,
		Measured: "parse of both versions and the machinery rule with its error text, per pair; " +
			"excludes process start and JSON decoding/encoding; cpu is the process's user+system time (all threads, GC included)",
	}

	if len(reqs) > 0 {
		result.PerPair = float64(times[0]) / float64(len(reqs))
	}

	return json.NewEncoder(out).Encode(result)
}

func main() {
	var err error

	switch {
	case len(os.Args) > 1 && os.Args[1] == "bench":
		err = bench(os.Args[2:], os.Stdin, os.Stdout)
	case len(os.Args) > 1 && (os.Args[1] == "version" || os.Args[1] == "info"):
		err = json.NewEncoder(os.Stdout).Encode(describe())
	case len(os.Args) > 1 && os.Args[1] == "printable":
		err = json.NewEncoder(os.Stdout).Encode(printableTable())
	case len(os.Args) > 1:
		err = fmt.Errorf("usage: oracle [bench [-rounds N] | version | printable] < requests.jsonl")
	default:
		err = serve(os.Stdin, os.Stdout)
	}

	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}
