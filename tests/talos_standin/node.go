package main

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/cosi-project/runtime/pkg/state"
	cosiserver "github.com/cosi-project/runtime/pkg/state/protobuf/server"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// The default Image Factory and its schematic of no customization
// (pkg/images/images.go: Factory, DefaultInstallerImageSchematic).
const (
	defaultFactory   = "https://factory.talos.dev"
	defaultSchematic = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
)

// The resources a node can be told to answer for as missing or unsupported.
const (
	kindExtensions    = "extensions"            // ExtensionStatuses.runtime.talos.dev
	kindPlatform      = "platformmetadata"      // PlatformMetadatas.talos.dev
	kindSecurity      = "securitystate"         // SecurityStates.talos.dev
	kindSchematic     = "imagefactoryschematic" // ImageFactorySchematics.runtime.talos.dev
	kindMachineStatus = "machinestatus"         // MachineStatuses.runtime.talos.dev

	modePresent     = "present"     // served
	modeMissing     = "missing"     // type registered, no resource: Get NotFound, List empty
	modeUnsupported = "unsupported" // type not registered: talosctl "not registered", Get PermissionDenied
)

var (
	kinds        = []string{kindExtensions, kindPlatform, kindSecurity, kindSchematic, kindMachineStatus}
	schematicID  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	platformName = regexp.MustCompile(`^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$`)
	// <factory>/<platform>-installer[-secureboot]/<schematic>:<version>, as upstream builds it
	// (cmd/talosctl/pkg/talos/helpers/image_factory.go BuildImageFactoryURL on main;
	// pkg/images/images.go NewInstallerImage).
	factoryInstaller = regexp.MustCompile(
		`^([^/@\s]+)/([A-Za-z0-9]+(?:-[A-Za-z0-9]+)*?)-installer(-secureboot)?/([0-9a-f]{64}):(v[0-9][^@\s/]*)$`)
	// the Talos version of a node, for what its release serves
	releaseVersion = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)\.`)
)

// extension is a system extension as its manifest names it (machinery extensions.Metadata).
type extension struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Author      string `json:"author,omitempty"`
	Description string `json:"description,omitempty"`
}

// nodeSettings is what a node runs, as -config gives it or a control line changes it; a
// field left out (nil) stays as it is.
type nodeSettings struct {
	ControlPlane *bool             `json:"controlPlane,omitempty"`
	Platform     *string           `json:"platform,omitempty"`
	SecureBoot   *bool             `json:"secureBoot,omitempty"`
	Schematic    *string           `json:"schematic,omitempty"` // "": not installed from an Image Factory
	Factory      *string           `json:"factory,omitempty"`   // the Image Factory's URL it came from
	Extensions   *[]extension      `json:"extensions,omitempty"`
	Resources    map[string]string `json:"resources,omitempty"` // kind -> present | missing | unsupported
	Reachable    *bool             `json:"reachable,omitempty"` // false: apid cannot reach it
	Ready        *bool             `json:"ready,omitempty"`     // MachineStatus ready
}

type node struct {
	mu           sync.Mutex
	name         string // the workload Node's name
	address      string // the address talosctl names it by (--nodes)
	controlPlane bool
	version      string // what it runs
	staged       string // what its next boot runs
	stagedImage  string // the installer that staged it
	pulled       map[string]bool
	bootID       string
	down         bool
	reachable    bool
	ready        bool
	platform     string
	secureBoot   bool
	schematic    string
	factory      string
	extensions   []extension
	resources    map[string]string
	images       []string // every installer LifecycleService.Upgrade was asked for, in order
	upgrades     int
	reboots      int
	events       []*machine.Event // since this boot
	listeners    map[chan *machine.Event]struct{}

	resourcesMu sync.Mutex        // serializes the COSI state's reconciliation
	cosi        state.State       // its machined's resources
	cosiAPI     *cosiserver.State // the State API over them, behind Talos's access policy
}

func newNode(name, address, version, boot string, controlPlane bool) *node {
	if boot == "" {
		boot = bootID()
	}
	resources := map[string]string{}
	for _, kind := range kinds {
		resources[kind] = modePresent
	}
	return &node{
		name: name, address: address, version: version, bootID: boot, controlPlane: controlPlane,
		pulled: map[string]bool{}, listeners: map[chan *machine.Event]struct{}{},
		reachable: true, ready: true, platform: "metal", schematic: defaultSchematic, factory: defaultFactory,
		resources: resources,
	}
}

// apply takes the settings given, all or none.
func (n *node) apply(settings nodeSettings) error {
	if settings.Platform != nil && !platformName.MatchString(*settings.Platform) {
		return fmt.Errorf("platform %q is not a Talos platform name", *settings.Platform)
	}
	if settings.Schematic != nil && *settings.Schematic != "" && !schematicID.MatchString(*settings.Schematic) {
		return fmt.Errorf("schematic %q is not an Image Factory schematic ID (64 hex digits)", *settings.Schematic)
	}
	if settings.Factory != nil {
		parsed, err := url.Parse(*settings.Factory)
		if err != nil || (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" || parsed.Path != "" {
			return fmt.Errorf("factory %q is not an Image Factory URL (https://host)", *settings.Factory)
		}
	}
	if settings.Extensions != nil {
		for _, ext := range *settings.Extensions {
			if ext.Name == "" || ext.Name == "schematic" {
				return fmt.Errorf("extension %q: a name other than schematic (the schematic is its own setting)", ext.Name)
			}
		}
	}
	for kind, mode := range settings.Resources {
		if !slices.Contains(kinds, kind) {
			return fmt.Errorf("resource %q is not one of %v", kind, kinds)
		}
		if mode != modePresent && mode != modeMissing && mode != modeUnsupported {
			return fmt.Errorf("resource %s: mode %q is not present, missing or unsupported", kind, mode)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if settings.ControlPlane != nil {
		n.controlPlane = *settings.ControlPlane
	}
	if settings.Platform != nil {
		n.platform = *settings.Platform
	}
	if settings.SecureBoot != nil {
		n.secureBoot = *settings.SecureBoot
	}
	if settings.Schematic != nil {
		n.schematic = *settings.Schematic
	}
	if settings.Factory != nil {
		n.factory = *settings.Factory
	}
	if settings.Extensions != nil {
		n.extensions = slices.Clone(*settings.Extensions)
	}
	for kind, mode := range settings.Resources {
		n.resources[kind] = mode
	}
	if settings.Reachable != nil {
		n.reachable = *settings.Reachable
	}
	if settings.Ready != nil {
		n.ready = *settings.Ready
	}
	return nil
}

// view is a node as the tests read it back (the control channel's "state").
type view struct {
	Name         string            `json:"name"`
	Address      string            `json:"address"`
	ControlPlane bool              `json:"controlPlane"`
	Version      string            `json:"version"`
	Staged       string            `json:"staged"`
	Down         bool              `json:"down"`
	Reachable    bool              `json:"reachable"`
	Ready        bool              `json:"ready"`
	Platform     string            `json:"platform"`
	SecureBoot   bool              `json:"secureBoot"`
	Schematic    string            `json:"schematic"`
	Factory      string            `json:"factory"`
	Extensions   []extension       `json:"extensions"`
	Resources    map[string]string `json:"resources"`
	Images       []string          `json:"images"`
	Upgrades     int               `json:"upgrades"`
	Reboots      int               `json:"reboots"`
	BootID       string            `json:"bootID"`
}

func (n *node) view() view {
	n.mu.Lock()
	defer n.mu.Unlock()
	resources := map[string]string{}
	for k, v := range n.resources {
		resources[k] = v
	}
	extensions := slices.Clone(n.extensions)
	if extensions == nil {
		extensions = []extension{}
	}
	images := slices.Clone(n.images)
	if images == nil {
		images = []string{}
	}
	return view{
		Name: n.name, Address: n.address, ControlPlane: n.controlPlane, Version: n.version, Staged: n.staged,
		Down: n.down, Reachable: n.reachable, Ready: n.ready, Platform: n.platform, SecureBoot: n.secureBoot,
		Schematic: n.schematic, Factory: n.factory, Extensions: extensions, Resources: resources,
		Images: images, Upgrades: n.upgrades, Reboots: n.reboots, BootID: n.bootID,
	}
}

// bootInto is what the node runs after booting what installer staged (called with n.mu
// held). An Image Factory installer brings its schematic's extensions (from -config's
// schematics; an unknown one brings none), its platform (the installer writes
// talos.platform into the boot entry) and its boot mode; any other installer (say
// ghcr.io/siderolabs/installer) brings no extension and no schematic.
func (n *node) bootInto(installer string, schematics map[string][]extension) (known bool) {
	match := factoryInstaller.FindStringSubmatch(installer)
	if match == nil {
		n.schematic, n.extensions = "", nil
		return true
	}
	n.factory = "https://" + match[1]
	n.platform = match[2]
	n.secureBoot = match[3] != ""
	n.schematic = match[4]
	extensions, known := schematics[n.schematic]
	if n.schematic == defaultSchematic {
		known = true
	}
	n.extensions = slices.Clone(extensions)
	return known
}

// release reports whether the node's Talos is at least major.minor.
func (n *node) release(major, minor int) bool {
	match := releaseVersion.FindStringSubmatch(n.version)
	if match == nil {
		return false
	}
	gotMajor, _ := strconv.Atoi(match[1])
	gotMinor, _ := strconv.Atoi(match[2])
	return gotMajor > major || (gotMajor == major && gotMinor >= minor)
}
