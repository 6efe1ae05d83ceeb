package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/blang/semver/v4"
)

// minor is (major, minor): what selects a row.
type minor struct{ major, minor uint64 }

func (m minor) less(o minor) bool {
	return m.major < o.major || (m.major == o.major && m.minor < o.minor)
}

func (m minor) String() string { return fmt.Sprintf("%d.%d", m.major, m.minor) }

// kubernetesRange is a range of Kubernetes minors, both ends inclusive.
type kubernetesRange struct{ low, high minor }

func (r kubernetesRange) holds(m minor) bool { return !m.less(r.low) && !r.high.less(m) }

// machineryRow is what Talos machinery stores for one target Talos minor, parsed.
type machineryRow struct {
	minKubernetes, maxKubernetes semver.Version // min inclusive, max exclusive (1.X.99)
}

// table is the JSON export of ichor.release.compat and the machinery rows it reads
// (tests/gotools/compat.json, written by `make compat-json`).
type table struct {
	machinery        map[minor]machineryRow
	talosKubernetes  map[minor]kubernetesRange
	ciliumKubernetes map[minor]kubernetesRange
	knownKubernetes  map[minor]bool
}

type exportRange struct {
	Low  [2]uint64 `json:"low"`
	High [2]uint64 `json:"high"`
}

type exportFile struct {
	Format    int `json:"format"`
	Machinery struct {
		Rows []struct {
			Talos         [2]uint64 `json:"talos"`
			MinKubernetes string    `json:"min_kubernetes"`
			MaxKubernetes string    `json:"max_kubernetes"`
		} `json:"rows"`
	} `json:"machinery"`
	TalosKubernetes []struct {
		Talos [2]uint64 `json:"talos"`
		exportRange
	} `json:"talos_kubernetes"`
	CiliumKubernetes []struct {
		Cilium [2]uint64 `json:"cilium"`
		exportRange
	} `json:"cilium_kubernetes"`
}

// exportFormat is the "format" the export carries; a change of shape moves it.
const exportFormat = 1

func loadTable(path string) (*table, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file exportFile
	if err := json.Unmarshal(raw, &file); err != nil {
		return nil, fmt.Errorf("%s is not the compatibility export: %w", path, err)
	}
	if file.Format != exportFormat {
		return nil, fmt.Errorf("%s has format %d, this program reads format %d: rebuild it (make testenv)", path, file.Format, exportFormat)
	}
	t := &table{
		machinery:        map[minor]machineryRow{},
		talosKubernetes:  map[minor]kubernetesRange{},
		ciliumKubernetes: map[minor]kubernetesRange{},
		knownKubernetes:  map[minor]bool{},
	}
	for _, row := range file.Machinery.Rows {
		lo, err := semver.ParseTolerant(row.MinKubernetes)
		if err != nil {
			return nil, fmt.Errorf("%s: Talos %d.%d min_kubernetes: %w", path, row.Talos[0], row.Talos[1], err)
		}
		hi, err := semver.ParseTolerant(row.MaxKubernetes)
		if err != nil {
			return nil, fmt.Errorf("%s: Talos %d.%d max_kubernetes: %w", path, row.Talos[0], row.Talos[1], err)
		}
		t.machinery[minor{row.Talos[0], row.Talos[1]}] = machineryRow{minKubernetes: lo, maxKubernetes: hi}
		// The minors the row accepts at least one patch of (max is exclusive).
		if lo.Major == hi.Major {
			last := int64(hi.Minor)
			if hi.Patch == 0 {
				last--
			}
			for m := int64(lo.Minor); m <= last; m++ {
				t.knownKubernetes[minor{lo.Major, uint64(m)}] = true
			}
		}
	}
	add := func(r exportRange) kubernetesRange {
		kr := kubernetesRange{low: minor{r.Low[0], r.Low[1]}, high: minor{r.High[0], r.High[1]}}
		if kr.low.major == kr.high.major {
			for m := kr.low.minor; m <= kr.high.minor; m++ {
				t.knownKubernetes[minor{kr.low.major, m}] = true
			}
		}
		return kr
	}
	for _, e := range file.TalosKubernetes {
		t.talosKubernetes[minor{e.Talos[0], e.Talos[1]}] = add(e.exportRange)
	}
	for _, e := range file.CiliumKubernetes {
		t.ciliumKubernetes[minor{e.Cilium[0], e.Cilium[1]}] = add(e.exportRange)
	}
	if len(t.machinery) == 0 || len(t.ciliumKubernetes) == 0 {
		return nil, fmt.Errorf("%s holds no rows", path)
	}
	return t, nil
}
