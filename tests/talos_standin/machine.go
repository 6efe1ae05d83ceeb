package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/apimachinery/pkg/types"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// installerTag reads the version from an installer reference: <registry>/<path>:<tag>.
var installerTag = regexp.MustCompile(`^[^@\s]+/[^@\s:]+:(v[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)$`)

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func bootID() string {
	id := randomID()
	return fmt.Sprintf("%s-%s-%s-%s-%s", id[0:8], id[8:12], id[12:16], id[16:20], id[20:32])
}

func hostname(n *node) *common.Metadata { return &common.Metadata{Hostname: n.address} }

// platformMode is the mode Talos reports for a platform (each platform's Mode() under
// internal/app/machined/pkg/runtime/v1alpha1/platform/).
func platformMode(platform string) string {
	switch platform {
	case "metal", "equinixMetal":
		return "metal"
	case "container":
		return "container"
	default:
		return "cloud"
	}
}

// checkControlplane is machined's guard of the control plane APIs
// (internal/app/internal/machinehelper/machinehelper.go).
func checkControlplane(n *node, api string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.controlPlane {
		return status.Errorf(codes.Unimplemented, "%s is only available on control plane nodes", api)
	}
	return nil
}

// --- MachineService -------------------------------------------------------------------

// Version is machined's (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go).
func (api machineAPI) Version(ctx context.Context, _ *emptypb.Empty) (*machine.VersionResponse, error) {
	n := nodeOf(ctx)
	n.mu.Lock()
	version, platform := n.version, n.platform
	n.mu.Unlock()
	api.s.log("version", n, map[string]any{"version": version})
	return &machine.VersionResponse{Messages: []*machine.Version{{
		Version:  &machine.VersionInfo{Tag: version, Os: "linux", Arch: runtime.GOARCH, GoVersion: runtime.Version()},
		Platform: &machine.PlatformInfo{Name: platform, Mode: platformMode(platform)},
		Features: &machine.FeaturesInfo{Rbac: true},
	}}}, nil
}

func (api machineAPI) Kubeconfig(_ *emptypb.Empty, stream grpc.ServerStreamingServer[common.Data]) error {
	s, n := api.s, nodeOf(stream.Context())
	if err := checkControlplane(n, "kubeconfig"); err != nil {
		return err
	}
	var archive bytes.Buffer
	zipped := gzip.NewWriter(&archive)
	tarred := tar.NewWriter(zipped)
	header := &tar.Header{Name: "kubeconfig", Mode: 0o600, Size: int64(len(s.kubeconfig)), ModTime: time.Now()}
	if err := tarred.WriteHeader(header); err != nil {
		return err
	}
	if _, err := tarred.Write(s.kubeconfig); err != nil {
		return err
	}
	if err := tarred.Close(); err != nil {
		return err
	}
	if err := zipped.Close(); err != nil {
		return err
	}
	s.log("kubeconfig", n, nil)
	return stream.Send(&common.Data{Bytes: archive.Bytes()})
}

func (api machineAPI) Read(request *machine.ReadRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	s, n := api.s, nodeOf(stream.Context())
	if request.GetPath() != "/proc/sys/kernel/random/boot_id" {
		return status.Errorf(codes.NotFound, "%s: this Talos API stand-in reads only the boot ID", request.GetPath())
	}
	n.mu.Lock()
	id := n.bootID
	n.mu.Unlock()
	s.log("read", n, map[string]any{"path": request.GetPath(), "bootID": id})
	return stream.Send(&common.Data{Bytes: []byte(id + "\n")})
}

func (api machineAPI) Reboot(ctx context.Context, request *machine.RebootRequest) (*machine.RebootResponse, error) {
	s, n := api.s, nodeOf(ctx)
	actor := randomID()
	s.emit(n, actor, &machine.SequenceEvent{Sequence: "reboot", Action: machine.SequenceEvent_START})
	s.log("reboot", n, map[string]any{"actor": actor, "mode": request.GetMode().String()})
	n.mu.Lock()
	n.reboots++
	n.mu.Unlock()
	go s.reboot(n, actor)
	return &machine.RebootResponse{Messages: []*machine.Reboot{{ActorId: actor}}}, nil
}

// reboot: the node goes away, then boots what was staged (or, for a node of -boot-old,
// its previous version back, as Talos does when the new one does not come up).
func (s *server) reboot(n *node, actor string) {
	time.Sleep(300 * time.Millisecond)
	n.mu.Lock()
	n.down = true
	for listener := range n.listeners {
		close(listener)
	}
	n.listeners = map[chan *machine.Event]struct{}{}
	n.events = nil
	n.mu.Unlock()
	s.etcd.nodeDown(n)
	s.log("down", n, map[string]any{"actor": actor})
	s.patchNode(n, false, "", "")
	time.Sleep(s.downFor)

	n.mu.Lock()
	previous, installer := n.version, n.stagedImage
	booted := map[string]any{"previous": previous}
	if n.staged != "" && !s.bootOld[n.name] {
		n.version = n.staged
		known := n.bootInto(installer, s.schematics)
		booted["installer"], booted["schematic"], booted["platform"], booted["secureBoot"] = installer, n.schematic, n.platform, n.secureBoot
		if !known {
			booted["unknownSchematic"] = true // -config names no extensions for it: it boots with none
		}
	}
	n.staged, n.stagedImage = "", ""
	n.bootID = bootID()
	version, id := n.version, n.bootID
	n.mu.Unlock()
	booted["version"], booted["bootID"] = version, id
	if err := n.sync(context.Background()); err != nil {
		booted["error"] = err.Error()
	}
	s.patchNode(n, true, version, id)
	s.applyNodeMetadata(n)

	n.mu.Lock()
	n.down = false
	n.mu.Unlock()
	s.etcd.nodeBooted(n, s.log)
	s.emit(n, "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_START})
	s.emit(n, "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_STOP})
	s.emit(n, "", &machine.MachineStatusEvent{
		Stage: machine.MachineStatusEvent_RUNNING, Status: &machine.MachineStatusEvent_MachineStatus{Ready: true},
	})
	s.log("boot", n, booted)
}

// patchNode writes what the node's kubelet would: NotReady while it is away; after the
// boot Ready, with the osImage and boot ID of what booted.
func (s *server) patchNode(n *node, ready bool, version, id string) {
	now := metav1.Now().UTC().Format(time.RFC3339)
	condition := map[string]any{
		"type": "Ready", "status": "False", "reason": "KubeletNotReady",
		"message": "the node is rebooting (Talos API stand-in)", "lastHeartbeatTime": now, "lastTransitionTime": now,
	}
	nodeStatus := map[string]any{"conditions": []any{condition}}
	if ready {
		condition["status"], condition["reason"], condition["message"] = "True", "KubeletReady", "kubelet is posting ready status"
		nodeStatus["nodeInfo"] = map[string]any{"osImage": fmt.Sprintf("Talos (%s)", version), "bootID": id}
	}
	body, _ := json.Marshal(map[string]any{"status": nodeStatus})
	err := untilAPI(func(ctx context.Context) error {
		_, err := s.kube.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
		return err
	})
	fields := map[string]any{"ready": ready}
	if ready {
		fields["osImage"] = fmt.Sprintf("Talos (%s)", version)
	}
	if err != nil {
		fields["error"] = err.Error()
	}
	s.log("node-status", n, fields)
}

func (s *server) emit(n *node, actor string, payload proto.Message) {
	value, err := proto.Marshal(payload)
	if err != nil {
		panic(err)
	}
	s.logMu.Lock()
	s.eventSeq++
	id := fmt.Sprintf("%020d", s.eventSeq)
	s.logMu.Unlock()
	event := &machine.Event{
		Metadata: hostname(n),
		Data:     &anypb.Any{TypeUrl: "talos/runtime/" + string(payload.ProtoReflect().Descriptor().FullName()), Value: value},
		Id:       id,
		ActorId:  actor,
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, event)
	for listener := range n.listeners {
		select {
		case listener <- event:
		default: // a listener that does not read loses the event, as with Talos's buffer
		}
	}
}

func (api machineAPI) Events(request *machine.EventsRequest, stream grpc.ServerStreamingServer[machine.Event]) error {
	s, n := api.s, nodeOf(stream.Context())
	listener := make(chan *machine.Event, 64)
	n.mu.Lock()
	if n.down {
		n.mu.Unlock()
		return status.Errorf(codes.Unavailable, "node %s is rebooting", n.address)
	}
	var backlog []*machine.Event
	switch tail := int(request.GetTailEvents()); {
	case tail < 0:
		backlog = slices.Clone(n.events)
	case tail > 0:
		backlog = slices.Clone(n.events[max(0, len(n.events)-tail):])
	}
	n.listeners[listener] = struct{}{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.listeners, listener)
		n.mu.Unlock()
	}()
	s.log("events", n, map[string]any{"tail": request.GetTailEvents(), "replayed": len(backlog)})
	matches := func(e *machine.Event) bool {
		return request.GetWithActorId() == "" || e.GetActorId() == request.GetWithActorId()
	}
	// the first message of a watch carries no event (clients read and drop it)
	if err := stream.Send(&machine.Event{Metadata: hostname(n)}); err != nil {
		return err
	}
	for _, event := range backlog {
		if matches(event) {
			if err := stream.Send(event); err != nil {
				return err
			}
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case event, open := <-listener:
			if !open {
				return status.Errorf(codes.Unavailable, "node %s is rebooting", n.address)
			}
			if matches(event) {
				if err := stream.Send(event); err != nil {
					return err
				}
			}
		}
	}
}

// --- etcd (MachineService, internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go)

func (api machineAPI) EtcdMemberList(ctx context.Context, request *machine.EtcdMemberListRequest) (*machine.EtcdMemberListResponse, error) {
	s, n := api.s, nodeOf(ctx)
	if err := checkControlplane(n, "member list"); err != nil {
		return nil, err
	}
	members, err := s.etcd.memberList(n, request.GetQueryLocal())
	fields := map[string]any{"queryLocal": request.GetQueryLocal(), "members": len(members)}
	if err != nil {
		fields["error"] = err.Error()
	}
	s.log("etcd-members", n, fields)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(members))
	for _, m := range members {
		names = append(names, m.GetHostname())
	}
	return &machine.EtcdMemberListResponse{Messages: []*machine.EtcdMembers{{LegacyMembers: names, Members: members}}}, nil
}

func (api machineAPI) EtcdStatus(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdStatusResponse, error) {
	s, n := api.s, nodeOf(ctx)
	if err := checkControlplane(n, "etcd status"); err != nil {
		return nil, err
	}
	memberStatus, err := s.etcd.memberStatus(n)
	fields := map[string]any{}
	if err != nil {
		fields["error"] = err.Error()
	} else {
		fields["leader"] = fmt.Sprintf("%016x", memberStatus.GetLeader())
		fields["errors"] = memberStatus.GetErrors()
	}
	s.log("etcd-status", n, fields)
	if err != nil {
		return nil, err
	}
	return &machine.EtcdStatusResponse{Messages: []*machine.EtcdStatus{{MemberStatus: memberStatus}}}, nil
}

func (api machineAPI) EtcdAlarmList(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdAlarmListResponse, error) {
	s, n := api.s, nodeOf(ctx)
	if err := checkControlplane(n, "etcd alarm list"); err != nil {
		return nil, err
	}
	alarms, err := s.etcd.alarmList(n)
	fields := map[string]any{"alarms": len(alarms)}
	if err != nil {
		fields["error"] = err.Error()
	}
	s.log("etcd-alarms", n, fields)
	if err != nil {
		return nil, err
	}
	return &machine.EtcdAlarmListResponse{Messages: []*machine.EtcdAlarm{{MemberAlarms: alarms}}}, nil
}

// --- ImageService and LifecycleService ------------------------------------------------

func (api imageAPI) Pull(request *machine.ImageServicePullRequest, stream grpc.ServerStreamingServer[machine.ImageServicePullResponse]) error {
	s, n := api.s, nodeOf(stream.Context())
	ref := request.GetImageRef()
	if ref == "" {
		return status.Error(codes.InvalidArgument, "image reference is empty")
	}
	n.mu.Lock()
	n.pulled[ref] = true
	n.mu.Unlock()
	s.log("pull", n, map[string]any{"image": ref, "namespace": request.GetContainerd().GetNamespace().String()})
	return stream.Send(&machine.ImageServicePullResponse{Response: &machine.ImageServicePullResponse_Name{Name: ref}})
}

// Upgrade counts every call that reaches the node and records the installer it names
// (view().Images, view().Upgrades), then stages it unless it cannot run.
func (api lifecycleAPI) Upgrade(request *machine.LifecycleServiceUpgradeRequest, stream grpc.ServerStreamingServer[machine.LifecycleServiceUpgradeResponse]) error {
	s, n := api.s, nodeOf(stream.Context())
	ref := request.GetSource().GetImageName()
	n.mu.Lock()
	n.upgrades++
	n.images = append(n.images, ref)
	count := n.upgrades
	pulled := n.pulled[ref]
	n.mu.Unlock()
	progress := func(message string, exit *int32) error {
		p := &machine.LifecycleServiceInstallProgress{Response: &machine.LifecycleServiceInstallProgress_Message{Message: message}}
		if exit != nil {
			p = &machine.LifecycleServiceInstallProgress{Response: &machine.LifecycleServiceInstallProgress_ExitCode{ExitCode: *exit}}
		}
		return stream.Send(&machine.LifecycleServiceUpgradeResponse{Progress: p})
	}
	fail := func(message string) error {
		s.log("upgrade", n, map[string]any{"image": ref, "count": count, "error": message})
		if err := progress(message, nil); err != nil {
			return err
		}
		one := int32(1)
		return progress("", &one)
	}
	match := installerTag.FindStringSubmatch(ref)
	switch {
	case match == nil:
		return fail(fmt.Sprintf("%q is not an installer reference with a version tag", ref))
	case !pulled:
		return fail(fmt.Sprintf("image %s is not in the node's image store: pull it first", ref))
	case s.failOn[n.name]:
		return fail(fmt.Sprintf("installer %s exited 1 (the stand-in was told to fail on %s)", ref, n.name))
	}
	n.mu.Lock()
	n.staged, n.stagedImage = match[1], ref
	n.mu.Unlock()
	s.log("upgrade", n, map[string]any{"image": ref, "count": count, "staged": match[1]})
	if err := progress(fmt.Sprintf("installing %s; it boots at the next reboot", match[1]), nil); err != nil {
		return err
	}
	zero := int32(0)
	return progress("", &zero)
}
