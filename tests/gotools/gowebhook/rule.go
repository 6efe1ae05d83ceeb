package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
)

// The rule names Ichor's refusals carry (ichor.release.refusals.Rule); only the two pair
// rules and the release of an observed Cilium by the preset are passable with the
// override verb, which this webhook never grants.
const (
	ruleForm             = "Form"
	ruleDowngrade        = "Downgrade"
	ruleTalosKubernetes  = "TalosKubernetes"
	ruleCiliumKubernetes = "CiliumKubernetes"
	ruleUnknownVersion   = "UnknownVersion"
	ruleCniPreset        = "CniPreset"
	ruleUnreadable       = "UnreadableVersion"
)

type refusal struct{ rule, message string }

func (r refusal) overridable() bool {
	return r.rule == ruleTalosKubernetes || r.rule == ruleCiliumKubernetes || r.rule == ruleCniPreset
}

// decide is the refusal a user without the override verb is shown: the first one no
// override passes, else the first one.
func decide(refusals ...*refusal) *refusal {
	var first *refusal
	for _, r := range refusals {
		if r == nil {
			continue
		}
		if !r.overridable() {
			return r
		}
		if first == nil {
			first = r
		}
	}
	return first
}

// malformed is a review or object this webhook cannot read (answered 400).
type malformed struct{ reason string }

func (m malformed) Error() string { return m.reason }

// cluster is what the rule reads of a TalosCluster: its version fields and the CNI its
// status shows.
type cluster struct {
	talos, kubernetes, contract string
	preset                      string
	detected, detectedVersion   *string
}

// parseObject decodes a raw object as a generic JSON value (numbers kept as written).
func parseObject(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, malformed{fmt.Sprintf("the object is not JSON: %v", err)}
	}
	return v, nil
}

// falsy is JSON's reading of "nothing here" by the Python side: null, false, 0, "", [], {}.
func falsy(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return err == nil && f == 0
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "missing"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	}
	return "an object"
}

func mapping(v any, where string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed{fmt.Sprintf("%s must be an object, not %s", where, kindOf(v))}
	}
	return m, nil
}

// orEmpty reads an optional object field: absent or falsy is an empty object.
func orEmpty(obj map[string]any, key, where string) (map[string]any, error) {
	v := obj[key]
	if falsy(v) {
		return map[string]any{}, nil
	}
	return mapping(v, where)
}

func str(obj map[string]any, key, where string) (string, error) {
	s, ok := obj[key].(string)
	if !ok {
		return "", malformed{fmt.Sprintf("%s.%s must be a string, not %s", where, key, kindOf(obj[key]))}
	}
	return s, nil
}

func optionalStr(obj map[string]any, key, where string) (*string, error) {
	v, present := obj[key]
	if !present || v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, malformed{fmt.Sprintf("%s.%s must be a string, not %s", where, key, kindOf(v))}
	}
	return &s, nil
}

func readCluster(body any, where string) (*cluster, error) {
	obj, err := mapping(body, where)
	if err != nil {
		return nil, err
	}
	meta, err := mapping(obj["metadata"], where+".metadata")
	if err != nil {
		return nil, err
	}
	for _, key := range []string{"namespace", "name"} {
		if _, err := optionalStr(meta, key, where+".metadata"); err != nil {
			return nil, err
		}
	}
	if name, _ := optionalStr(meta, "name", where+".metadata"); name == nil || *name == "" {
		if _, err := optionalStr(meta, "generateName", where+".metadata"); err != nil {
			return nil, err
		}
	}
	spec, err := mapping(obj["spec"], where+".spec")
	if err != nil {
		return nil, err
	}
	cni, err := orEmpty(spec, "cni", where+".spec.cni")
	if err != nil {
		return nil, err
	}
	status, err := orEmpty(obj, "status", where+".status")
	if err != nil {
		return nil, err
	}
	statusCNI, err := orEmpty(status, "cni", where+".status.cni")
	if err != nil {
		return nil, err
	}
	c := &cluster{}
	if c.talos, err = str(spec, "talosVersion", where+".spec"); err != nil {
		return nil, err
	}
	if c.kubernetes, err = str(spec, "kubernetesVersion", where+".spec"); err != nil {
		return nil, err
	}
	if c.contract, err = str(spec, "versionContract", where+".spec"); err != nil {
		return nil, err
	}
	preset, err := optionalStr(cni, "preset", where+".spec.cni")
	if err != nil {
		return nil, err
	}
	c.preset = "cilium"
	if preset != nil && *preset != "" {
		c.preset = *preset
	}
	if c.detected, err = optionalStr(statusCNI, "detected", where+".status.cni"); err != nil {
		return nil, err
	}
	if c.detectedVersion, err = optionalStr(statusCNI, "detectedVersion", where+".status.cni"); err != nil {
		return nil, err
	}
	return c, nil
}

var (
	fullForm     = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$`)
	contractForm = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
)

// specVersion is a spec version field in its full form vX.Y.Z.
func specVersion(value, field string) (semver.Version, *refusal) {
	if fullForm.MatchString(value) {
		if v, err := semver.ParseTolerant(value); err == nil {
			return v, nil
		}
	}
	return semver.Version{}, &refusal{ruleForm, fmt.Sprintf("spec.%s %q is not a full version vX.Y.Z", field, value)}
}

func contractVersion(value string) (minor, *refusal) {
	if m := contractForm.FindStringSubmatch(value); m != nil {
		major, err1 := strconv.ParseUint(m[1], 10, 64)
		min, err2 := strconv.ParseUint(m[2], 10, 64)
		if err1 == nil && err2 == nil {
			return minor{major, min}, nil
		}
	}
	return minor{}, &refusal{ruleForm, fmt.Sprintf("spec.versionContract %q is not a version contract vX.Y", value)}
}

// review is the TalosCluster write rule: the form of each field the write sets, no
// downgrade, a change of the preset while a Cilium is observed, then the
// Talos/Kubernetes pair (and the running Cilium when Kubernetes moves and the cluster
// is managed before or after the write) when a version moves. old is nil on a create.
func (t *table) review(c, old *cluster) *refusal {
	var forms []*refusal
	for _, f := range []struct {
		name, value string
		before      *string
	}{
		{"talosVersion", c.talos, beforeOf(old, func(o *cluster) string { return o.talos })},
		{"kubernetesVersion", c.kubernetes, beforeOf(old, func(o *cluster) string { return o.kubernetes })},
	} {
		if f.before != nil && *f.before == f.value {
			continue
		}
		if _, r := specVersion(f.value, f.name); r != nil {
			forms = append(forms, r)
		}
	}
	if old == nil || c.contract != old.contract {
		if _, r := contractVersion(c.contract); r != nil {
			forms = append(forms, r)
		}
	}
	if len(forms) > 0 {
		return forms[0]
	}
	var downgrade *refusal
	if old != nil {
		downgrade = noDowngrade(old, c)
	}
	talosMoved := old == nil || c.talos != old.talos
	kubernetesMoved := old == nil || c.kubernetes != old.kubernetes
	managed := isCilium(&c.preset) || (old != nil && isCilium(&old.preset))
	var step *refusal
	switch {
	case kubernetesMoved:
		step = t.kubernetesStep(c, managed)
	case talosMoved:
		step = t.pairOrForm(c)
	}
	var preset *refusal
	if old != nil {
		preset = t.presetStep(c, old, kubernetesMoved)
	}
	return decide(downgrade, preset, step)
}

// presetStep judges a write that changes whether the Cilium table holds the cluster,
// while a Cilium is observed: releasing it needs the verb (CniPreset), and either way
// the Cilium that runs is asked of the Kubernetes the cluster runs (unless Kubernetes
// moves in the same write, whose step asks it of the new version).
func (t *table) presetStep(c, old *cluster, kubernetesMoved bool) *refusal {
	before, after := isCilium(&old.preset), isCilium(&c.preset)
	if before == after || !isCilium(c.detected) {
		return nil
	}
	var release *refusal
	if before {
		release = &refusal{ruleCniPreset, fmt.Sprintf("spec.cni.preset from %s to %s releases the observed Cilium from its table", old.preset, c.preset)}
	}
	if unreadable(c) {
		// a Cilium seen whose release cannot be read is neither taken over nor released
		return decide(release, &refusal{ruleUnreadable, "Cilium is detected and its release cannot be read"})
	}
	if kubernetesMoved {
		return release
	}
	kubernetes, r := parsed(c.kubernetes, "kubernetesVersion")
	if r != nil {
		return decide(release, r)
	}
	return decide(release, t.cilium(c, true, kubernetes))
}

func beforeOf(old *cluster, get func(*cluster) string) *string {
	if old == nil {
		return nil
	}
	v := get(old)
	return &v
}

func noDowngrade(old, c *cluster) *refusal {
	for _, f := range []struct{ name, before, after string }{
		{"talosVersion", old.talos, c.talos},
		{"kubernetesVersion", old.kubernetes, c.kubernetes},
	} {
		if f.before == f.after {
			continue
		}
		after, r := specVersion(f.after, f.name)
		if r != nil {
			return r
		}
		if before, r := specVersion(f.before, f.name); r == nil && after.LT(before) {
			return &refusal{ruleDowngrade, fmt.Sprintf("spec.%s %s is older than %s", f.name, f.after, f.before)}
		}
	}
	if old.contract != c.contract {
		after, r := contractVersion(c.contract)
		if r != nil {
			return r
		}
		if before, r := contractVersion(old.contract); r == nil && after.less(before) {
			return &refusal{ruleDowngrade, fmt.Sprintf("spec.versionContract %s is older than %s", c.contract, old.contract)}
		}
	}
	return nil
}

func parsed(value, field string) (semver.Version, *refusal) {
	v, err := semver.ParseTolerant(value)
	if err != nil {
		return v, &refusal{ruleForm, fmt.Sprintf("spec.%s %q is not a version: %v", field, value, err)}
	}
	return v, nil
}

// pairOrForm is the pair rule on the cluster's two versions; an unchanged field that does
// not parse (stored before any webhook ran) is a form refusal.
func (t *table) pairOrForm(c *cluster) *refusal {
	talos, r := parsed(c.talos, "talosVersion")
	if r != nil {
		return r
	}
	kubernetes, r := parsed(c.kubernetes, "kubernetesVersion")
	if r != nil {
		return r
	}
	return t.pair(talos, kubernetes)
}

func (t *table) kubernetesStep(c *cluster, managed bool) *refusal {
	talos, r := parsed(c.talos, "talosVersion")
	if r != nil {
		return r
	}
	kubernetes, r := parsed(c.kubernetes, "kubernetesVersion")
	if r != nil {
		return r
	}
	return decide(t.pair(talos, kubernetes), t.cilium(c, managed, kubernetes))
}

func minorOf(v semver.Version) minor { return minor{v.Major, v.Minor} }

func (t *table) unknownKubernetes(kubernetes semver.Version) *refusal {
	if t.knownKubernetes[minorOf(kubernetes)] {
		return nil
	}
	return &refusal{ruleUnknownVersion, fmt.Sprintf("Kubernetes %s is not in the compatibility table", kubernetes)}
}

// pair is the Talos/Kubernetes rule: unknown versions first, then the support matrix
// where it holds the Talos minor, then machinery's bounds.
func (t *table) pair(talos, kubernetes semver.Version) *refusal {
	row, inMachinery := t.machinery[minorOf(talos)]
	matrix, inMatrix := t.talosKubernetes[minorOf(talos)]
	if !inMachinery && !inMatrix {
		return &refusal{ruleUnknownVersion, fmt.Sprintf("Talos %s is not in the compatibility table", talos)}
	}
	if r := t.unknownKubernetes(kubernetes); r != nil {
		return r
	}
	if inMatrix && !matrix.holds(minorOf(kubernetes)) {
		return &refusal{ruleTalosKubernetes, fmt.Sprintf("Talos %s does not run Kubernetes %s (support matrix %s to %s)", minorOf(talos), kubernetes, matrix.low, matrix.high)}
	}
	if !inMachinery {
		return &refusal{ruleTalosKubernetes, fmt.Sprintf("Talos machinery has no row for Talos %s", talos)}
	}
	if k := core(kubernetes); k.lt(core(row.minKubernetes)) || !k.lt(core(row.maxKubernetes)) {
		return &refusal{ruleTalosKubernetes, fmt.Sprintf("Talos %s runs Kubernetes %s up to, not including, %s", minorOf(talos), row.minKubernetes, row.maxKubernetes)}
	}
	return nil
}

// core orders (major, minor, patch), pre-release ignored, as machinery compares.
type coreVersion [3]uint64

func core(v semver.Version) coreVersion { return coreVersion{v.Major, v.Minor, v.Patch} }

func (a coreVersion) lt(b coreVersion) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// unreadable: the status shows Cilium detected and no release (absent or blank).
func unreadable(c *cluster) bool {
	return isCilium(c.detected) && (c.detectedVersion == nil || pythonStrip(*c.detectedVersion) == "")
}

// cilium is the Cilium half of a Kubernetes step: only for a managed Cilium the status
// shows; one whose release cannot be read is refused, and no override passes it.
func (t *table) cilium(c *cluster, managed bool, kubernetes semver.Version) *refusal {
	if !managed || !isCilium(c.detected) {
		return nil
	}
	if unreadable(c) {
		return &refusal{ruleUnreadable, "Cilium is detected and its release cannot be read"}
	}
	text := pythonStrip(*c.detectedVersion)
	cilium, err := semver.ParseTolerant(text)
	if err != nil {
		return &refusal{ruleUnknownVersion, fmt.Sprintf("Cilium %q is not a version", text)}
	}
	entry, ok := t.ciliumKubernetes[minorOf(cilium)]
	if !ok {
		return &refusal{ruleUnknownVersion, fmt.Sprintf("Cilium %s is not in the compatibility table", cilium)}
	}
	if r := t.unknownKubernetes(kubernetes); r != nil {
		return r
	}
	if entry.holds(minorOf(kubernetes)) {
		return nil
	}
	return &refusal{ruleCiliumKubernetes, fmt.Sprintf("Cilium %s does not run Kubernetes %s (CI matrix %s to %s)", minorOf(cilium), kubernetes, entry.low, entry.high)}
}

// isCilium: the name, however cased and padded, is "cilium" (ASCII letters only: no other
// character lowercases to one of them on the Python side).
func isCilium(name *string) bool {
	return name != nil && strings.EqualFold(asciiOnly(pythonStrip(*name)), "cilium")
}

func asciiOnly(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return ""
		}
	}
	return s
}

// pythonStrip trims what Python's str.strip() trims: Unicode white space and the ASCII
// separators U+001C..U+001F, which Go's unicode.IsSpace leaves.
func pythonStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return (r >= 0x1c && r <= 0x1f) || isGoSpace(r)
	})
}

func isGoSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
