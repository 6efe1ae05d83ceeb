package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	cosiserver "github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"github.com/cosi-project/runtime/pkg/state/registry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	machinetype "github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/extensions"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/role"
)

// ImageFactorySchematic is Talos 1.14's resource (pkg/machinery/resources/runtime/
// image_factory_schematic.go, first in v1.14.0-alpha.2), copied here because the machinery
// module the stand-in builds against (v1.13.9) predates it: same type, ID, fields and
// protobuf numbers, so a 1.14 client decodes it. Its controller
// (internal/app/machined/pkg/controllers/runtime/image_factory_schematic.go) makes it from
// the `schematic` meta-extension: ID its version, flavor and API URL its author
// "Image Factory (https://factory.talos.dev)".
const (
	ImageFactorySchematicType                = resource.Type("ImageFactorySchematics.runtime.talos.dev")
	ImageFactorySchematicID      resource.ID = "image-factory-schematic"
	imageFactorySchematicVersion             = 14 // served by Talos 1.14 and later
)

type ImageFactorySchematic = typed.Resource[ImageFactorySchematicSpec, ImageFactorySchematicExtension]

type ImageFactorySchematicSpec struct {
	SchematicID string `yaml:"schematicId" protobuf:"1"`
	Flavor      string `yaml:"flavor" protobuf:"2"`
	APIURL      string `yaml:"apiUrl" protobuf:"3"`
}

func (o ImageFactorySchematicSpec) DeepCopy() ImageFactorySchematicSpec { return o }

func NewImageFactorySchematic(namespace resource.Namespace, id resource.ID) *ImageFactorySchematic {
	return typed.NewResource[ImageFactorySchematicSpec, ImageFactorySchematicExtension](
		resource.NewMetadata(namespace, ImageFactorySchematicType, id, resource.VersionUndefined),
		ImageFactorySchematicSpec{},
	)
}

type ImageFactorySchematicExtension struct{}

func (ImageFactorySchematicExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type:             ImageFactorySchematicType,
		Aliases:          []resource.Type{},
		DefaultNamespace: runtime.NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Schematic ID", JSONPath: `{.schematicId}`},
			{Name: "Flavor", JSONPath: `{.flavor}`},
			{Name: "API URL", JSONPath: `{.apiUrl}`},
		},
	}
}

func init() {
	if err := protobuf.RegisterDynamic[ImageFactorySchematicSpec](ImageFactorySchematicType, &ImageFactorySchematic{}); err != nil {
		panic(err)
	}
}

// accessPolicy is Talos's filter in front of its resources (internal/app/resources/
// access.go, wrapped around the State API in internal/app/machined/internal/server/
// v1alpha1/v1alpha1_server.go): read only, a type must be registered, a Sensitive one
// needs os:admin, and the namespace must exist.
func accessPolicy(st state.State) state.FilteringRule {
	return func(ctx context.Context, access state.Access) error {
		if !access.Verb.Readonly() {
			return status.Error(codes.PermissionDenied, "write access is not allowed")
		}
		rd, err := safe.StateGet[*meta.ResourceDefinition](ctx, st, resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(access.ResourceType), resource.VersionUndefined))
		if err != nil {
			if state.IsNotFoundError(err) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("resource type %q is not supported", access.ResourceType))
			}
			return err
		}
		roles := rolesOf(ctx)
		switch rd.TypedSpec().Sensitivity {
		case meta.Sensitive:
			if !roles.Includes(role.Admin) {
				return errNotAuthorized
			}
		case meta.NonSensitive:
		default:
			return fmt.Errorf("unexpected sensitivity %q", rd.TypedSpec().Sensitivity)
		}
		_, err = safe.StateGet[*meta.Namespace](ctx, st, resource.NewMetadata(meta.NamespaceName, meta.NamespaceType, access.ResourceNamespace, resource.VersionUndefined))
		if err != nil {
			if state.IsNotFoundError(err) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("namespace %q is not supported", access.ResourceNamespace))
			}
			return err
		}
		return nil
	}
}

// initState makes the node's resources as machined keeps them
// (internal/app/machined/pkg/runtime/v1alpha2/v1alpha2_state.go: namespaced in-memory
// state, the default namespaces and definitions, then Talos's), with the State API over
// them behind the access policy.
func (n *node) initState(ctx context.Context) error {
	st := state.WrapCore(namespaced.NewState(inmem.Build))
	namespaces := registry.NewNamespaceRegistry(st)
	if err := namespaces.RegisterDefault(ctx); err != nil {
		return err
	}
	if err := registry.NewResourceRegistry(st).RegisterDefault(ctx); err != nil {
		return err
	}
	for _, ns := range []struct{ name, description string }{
		{config.NamespaceName, "Talos node configuration."},
		{k8s.NamespaceName, "Kubernetes all node types resources."},
		{runtime.NamespaceName, "Talos runtime resources."},
	} {
		if err := namespaces.Register(ctx, ns.name, ns.description); err != nil {
			return err
		}
	}
	n.cosi = st
	n.cosiAPI = cosiserver.NewState(state.WrapCore(state.Filter(st, accessPolicy(st))))
	return n.sync(ctx)
}

// kindOf pairs a kind with its definition and the resources the node's settings make.
type kindOf struct {
	kind      string // "" for those always served
	rd        meta.ResourceWithRD
	namespace resource.Namespace
	typ       resource.Type
	desired   []resource.Resource
}

// sync brings the node's resources to what its settings say, as its controllers would.
func (n *node) sync(ctx context.Context) error {
	n.resourcesMu.Lock()
	defer n.resourcesMu.Unlock()
	v := n.view()
	schematicServed := n.release(1, imageFactorySchematicVersion)

	var statuses []resource.Resource
	layers := v.Extensions
	if v.Schematic != "" {
		// the Image Factory appends its meta-extension last (image-factory
		// internal/profile/profile.go; the manifest in internal/artifacts/schematic.go)
		layers = append(layers, extension{
			Name:        "schematic",
			Version:     v.Schematic,
			Author:      "Image Factory (" + v.Factory + ")",
			Description: "Virtual extension which specifies the schematic of the image built with schematic.",
		})
	}
	for i, ext := range layers {
		// IDs are the extension's directory in the image, its index
		// (pkg/imager/imager.go; internal/app/machined/pkg/controllers/runtime/extension_status.go)
		r := runtime.NewExtensionStatus(runtime.NamespaceName, strconv.Itoa(i))
		r.TypedSpec().Image = strconv.Itoa(i) + ".sqsh"
		r.TypedSpec().Metadata = extensions.Metadata{
			Name: ext.Name, Version: ext.Version, Author: ext.Author, Description: ext.Description,
			Compatibility: extensions.Compatibility{Talos: extensions.Constraint{Version: ">= 1.0.0"}},
		}
		statuses = append(statuses, r)
	}

	platform := runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID)
	platform.TypedSpec().Platform = v.Platform
	platform.TypedSpec().Hostname = v.Name

	security := runtime.NewSecurityStateSpec(runtime.NamespaceName)
	security.TypedSpec().SecureBoot = v.SecureBoot
	security.TypedSpec().BootedWithUKI = v.SecureBoot

	var schematics []resource.Resource
	if v.Schematic != "" {
		schematic := NewImageFactorySchematic(runtime.NamespaceName, ImageFactorySchematicID)
		flavor, apiURL := parseAuthor("Image Factory (" + v.Factory + ")")
		schematic.TypedSpec().SchematicID = v.Schematic
		schematic.TypedSpec().Flavor = flavor
		schematic.TypedSpec().APIURL = apiURL
		schematics = append(schematics, schematic)
	}

	machineStatus := runtime.NewMachineStatus()
	machineStatus.TypedSpec().Stage = runtime.MachineStageRunning
	machineStatus.TypedSpec().Status.Ready = v.Ready
	if !v.Ready {
		machineStatus.TypedSpec().Status.UnmetConditions = []runtime.UnmetCondition{
			{Name: "services", Reason: "some services are not healthy (the Talos API stand-in was told so)"},
		}
	}

	machineType := config.NewMachineType()
	if v.ControlPlane {
		machineType.SetMachineType(machinetype.TypeControlPlane)
	} else {
		machineType.SetMachineType(machinetype.TypeWorker)
	}

	nodename := k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID)
	nodename.TypedSpec().Nodename = v.Name
	nodename.TypedSpec().HostnameVersion = "1"

	all := []kindOf{
		{kindExtensions, &runtime.ExtensionStatus{}, runtime.NamespaceName, runtime.ExtensionStatusType, statuses},
		{kindPlatform, &runtime.PlatformMetadata{}, runtime.NamespaceName, runtime.PlatformMetadataType, []resource.Resource{platform}},
		{kindSecurity, &runtime.SecurityState{}, runtime.NamespaceName, runtime.SecurityStateType, []resource.Resource{security}},
		{kindSchematic, &ImageFactorySchematic{}, runtime.NamespaceName, ImageFactorySchematicType, schematics},
		{kindMachineStatus, &runtime.MachineStatus{}, runtime.NamespaceName, runtime.MachineStatusType, []resource.Resource{machineStatus}},
		{"", &config.MachineType{}, config.NamespaceName, config.MachineTypeType, []resource.Resource{machineType}},
		{"", &k8s.Nodename{}, k8s.NamespaceName, k8s.NodenameType, []resource.Resource{nodename}},
	}
	for _, k := range all {
		mode := modePresent
		if k.kind != "" {
			mode = v.Resources[k.kind]
		}
		if k.kind == kindSchematic && !schematicServed {
			mode = modeUnsupported // Talos before 1.14 has no such type
		}
		if err := n.reconcile(ctx, k, mode); err != nil {
			return fmt.Errorf("%s: %w", k.typ, err)
		}
	}
	return nil
}

func (n *node) reconcile(ctx context.Context, k kindOf, mode string) error {
	rd, err := meta.NewResourceDefinition(k.rd.ResourceDefinition())
	if err != nil {
		return err
	}
	_, err = n.cosi.Get(ctx, rd.Metadata())
	registered := err == nil
	if err != nil && !state.IsNotFoundError(err) {
		return err
	}
	if mode != modeUnsupported && !registered {
		if err := registry.NewResourceRegistry(n.cosi).Register(ctx, k.rd); err != nil {
			return err
		}
	}
	want := map[resource.ID]resource.Resource{}
	if mode == modePresent {
		for _, r := range k.desired {
			want[r.Metadata().ID()] = r
		}
	}
	existing, err := n.cosi.List(ctx, resource.NewMetadata(k.namespace, k.typ, "", resource.VersionUndefined))
	if err != nil {
		return err
	}
	for _, r := range existing.Items {
		if _, keep := want[r.Metadata().ID()]; !keep {
			if err := n.cosi.Destroy(ctx, r.Metadata()); err != nil {
				return err
			}
		}
	}
	for _, r := range k.desired {
		if _, keep := want[r.Metadata().ID()]; !keep {
			continue
		}
		current, err := n.cosi.Get(ctx, r.Metadata())
		switch {
		case state.IsNotFoundError(err):
			if err := n.cosi.Create(ctx, r.DeepCopy()); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		if specOf(current) == specOf(r) {
			continue // as a controller does: no change, no new version
		}
		updated := r.DeepCopy()
		updated.Metadata().SetVersion(current.Metadata().Version())
		if err := n.cosi.Update(ctx, updated); err != nil {
			return err
		}
	}
	if mode == modeUnsupported && registered {
		return n.cosi.Destroy(ctx, rd.Metadata(), state.WithDestroyOwner(meta.Owner))
	}
	return nil
}

// specOf is a resource's spec as the API carries it (its YAML form), to compare.
func specOf(r resource.Resource) string {
	encoded, err := protobuf.FromResource(r)
	if err != nil {
		return "error: " + err.Error()
	}
	marshaled, err := encoded.Marshal()
	if err != nil {
		return "error: " + err.Error()
	}
	return marshaled.GetSpec().GetYamlSpec()
}

// parseAuthor splits "Image Factory (https://factory.talos.dev)" as Talos does
// (internal/app/machined/pkg/controllers/runtime/image_factory_schematic.go).
func parseAuthor(author string) (flavor, apiURL string) {
	idx := strings.LastIndex(author, " (")
	if idx == -1 {
		return author, ""
	}
	return author[:idx], strings.TrimSuffix(author[idx+2:], ")")
}
