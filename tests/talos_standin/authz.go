package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/role"
)

// rules is machined's table of which roles may call what
// (internal/app/machined/pkg/system/services/machined.go, v1.13.9), for the methods the
// stand-in serves; a method not in it needs os:admin (FallbackRoles), as there.
var rules = map[string]role.Set{
	"/machine.ImageService/Pull":            role.MakeSet(role.Admin, role.Operator),
	"/machine.LifecycleService/Upgrade":     role.MakeSet(role.Admin),
	"/machine.MachineService/EtcdAlarmList": role.MakeSet(role.Admin, role.Operator, role.Reader, role.EtcdBackup),
	"/machine.MachineService/EtcdMemberList": role.MakeSet(
		role.Admin, role.Operator, role.Reader, role.EtcdBackup),
	"/machine.MachineService/EtcdStatus": role.MakeSet(role.Admin, role.Operator, role.Reader, role.EtcdBackup),
	"/machine.MachineService/Events":     role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/machine.MachineService/Kubeconfig": role.MakeSet(role.Admin),
	"/machine.MachineService/Read":       role.MakeSet(role.Admin),
	"/machine.MachineService/Reboot":     role.MakeSet(role.Admin, role.Operator),
	"/machine.MachineService/Upgrade":    role.MakeSet(role.Admin),
	"/machine.MachineService/Version":    role.MakeSet(role.Admin, role.Operator, role.Reader),

	// per-type authorization is the access policy's (resources.go)
	"/cosi.resource.State/Create":  role.MakeSet(role.Admin),
	"/cosi.resource.State/Destroy": role.MakeSet(role.Admin),
	"/cosi.resource.State/Get":     role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/cosi.resource.State/List":    role.MakeSet(role.Admin, role.Operator, role.Reader),
	"/cosi.resource.State/Update":  role.MakeSet(role.Admin),
	"/cosi.resource.State/Watch":   role.MakeSet(role.Admin, role.Operator, role.Reader),
}

var fallbackRoles = role.MakeSet(role.Admin)

// errNotAuthorized is authz.ErrNotAuthorized (pkg/grpc/middleware/authz/authorizer.go).
var errNotAuthorized = status.Error(codes.PermissionDenied, "not authorized")

type rolesKey struct{}

// rolesOf is apid's Injector in its Enabled mode (pkg/grpc/middleware/authz/injector.go,
// the package not imported: the wrapper module lacks go-grpc-middleware): the roles are
// the Organizations of the client certificate, unknown ones ignored; a certificate with
// os:impersonator may name the roles in the talos-role metadata instead.
func rolesOf(ctx context.Context) role.Set {
	if roles, ok := ctx.Value(rolesKey{}).(role.Set); ok {
		return roles
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return role.Zero
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return role.Zero
	}
	roles, _ := role.Parse(info.State.PeerCertificates[0].Subject.Organization)
	if roles.Includes(role.Impersonator) {
		md, _ := metadata.FromIncomingContext(ctx)
		if named := md.Get(constants.APIAuthzRoleMetadataKey); len(named) > 0 {
			roles, _ = role.Parse(named)
		}
	}
	return roles
}

func withRoles(ctx context.Context) context.Context {
	return context.WithValue(ctx, rolesKey{}, rolesOf(ctx))
}

// authorize is machined's Authorizer (pkg/grpc/middleware/authz/authorizer.go).
func (s *server) authorize(ctx context.Context, method string, n *node) error {
	allowed, found := rules[method]
	if !found {
		allowed = fallbackRoles
	}
	roles := rolesOf(ctx)
	if allowed.IncludesAny(roles) {
		return nil
	}
	s.log("refused", n, map[string]any{"method": method, "roles": roles.Strings()})
	return errNotAuthorized
}

type targetKey struct{}

// nodeOf is the node a handler answers for (set by the interceptors).
func nodeOf(ctx context.Context) *node {
	n, _ := ctx.Value(targetKey{}).(*node)
	return n
}

// resolve is apid's router (internal/app/apid/pkg/director/director.go) for one target:
// "node" names it, no metadata means the endpoint itself.
func (s *server) resolve(target string) (*node, error) {
	if target == "" {
		return s.endpoint, nil
	}
	n, ok := s.nodes[strings.TrimSpace(target)]
	if !ok {
		known := make([]string, 0, len(s.nodes))
		for a := range s.nodes {
			known = append(known, a)
		}
		slices.Sort(known)
		return nil, status.Errorf(codes.Unavailable,
			"no Talos node answers at %s (this Talos API stand-in serves %s)", target, strings.Join(known, ", "))
	}
	return n, nil
}

// answers is what apid meets when it forwards to the node: a node set unreachable fails
// its dial, a rebooting one is away.
func (n *node) answers() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case !n.reachable:
		return status.Errorf(codes.Unavailable,
			`connection error: desc = "transport: Error while dialing: dial tcp %s:50000: connect: no route to host"`, n.address)
	case n.down:
		return status.Errorf(codes.Unavailable, "node %s is rebooting", n.address)
	}
	return nil
}

// oneToMany lists the services apid fans a call out for; any other with "nodes" is refused.
func oneToMany(method string) bool {
	for _, prefix := range []string{
		"/machine.MachineService/", "/cluster.ClusterService/", "/inspect.InspectService/",
		"/storage.StorageService/", "/time.TimeService/",
	} {
		if strings.HasPrefix(method, prefix) {
			return true
		}
	}
	return false
}

// forNode is the incoming context as apid forwards it to one node.
func forNode(ctx context.Context, target string) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	delete(md, "nodes")
	md.Set("node", target)
	return metadata.NewIncomingContext(ctx, md)
}

// targets splits the "nodes" metadata (as apid reads it; a value "a,b" also counts as two).
func targets(md metadata.MD) []string {
	var found []string
	for _, raw := range md.Get("nodes") {
		for _, address := range strings.Split(raw, ",") {
			found = append(found, strings.TrimSpace(address))
		}
	}
	return found
}

// one routes a call to one node, then authorizes it as that node's machined does.
func (s *server) one(ctx context.Context, method string) (context.Context, *node, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	names := md.Get("node")
	if len(names) > 1 {
		return ctx, nil, status.Error(codes.InvalidArgument, "node metadata must be single-valued")
	}
	target := ""
	if len(names) == 1 {
		target = names[0]
	}
	n, err := s.resolve(target)
	if err != nil {
		return ctx, nil, err
	}
	if err := n.answers(); err != nil {
		return ctx, n, err
	}
	if err := s.authorize(ctx, method, n); err != nil {
		return ctx, n, err
	}
	return context.WithValue(ctx, targetKey{}, n), n, nil
}

func (s *server) unary(ctx context.Context, request any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx = withRoles(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	if nodes := targets(md); len(nodes) > 0 {
		if !oneToMany(info.FullMethod) {
			return nil, status.Errorf(codes.InvalidArgument, "one-2-many proxying is not supported for method %s", info.FullMethod)
		}
		return s.fanOut(ctx, request, info, handler, nodes)
	}
	ctx, _, err := s.one(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, request)
}

type targetStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (t targetStream) Context() context.Context { return t.ctx }

// stream routes a streaming call. Simplified: with "nodes" it streams from one node only
// (apid would merge the streams of several, errors as messages).
func (s *server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := withRoles(ss.Context())
	md, _ := metadata.FromIncomingContext(ctx)
	if nodes := targets(md); len(nodes) > 0 {
		if !oneToMany(info.FullMethod) {
			return status.Errorf(codes.InvalidArgument, "one-2-many proxying is not supported for method %s", info.FullMethod)
		}
		if len(nodes) != 1 {
			return status.Errorf(codes.InvalidArgument, "this Talos API stand-in streams from one node at a time, not %d", len(nodes))
		}
		ctx = forNode(ctx, nodes[0])
	}
	ctx, _, err := s.one(ctx, info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, targetStream{ServerStream: ss, ctx: ctx})
}

// fanOut is apid's one-to-many proxying of a unary call (internal/app/apid/pkg/backend/
// apid.go AppendInfo and BuildError): each node's reply gets metadata naming the node, a
// node's error becomes a reply carrying it, and the replies are concatenated (the
// responses' one repeated field, number 1).
func (s *server) fanOut(ctx context.Context, request any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler, nodes []string) (any, error) {
	response, err := responseOf(info.FullMethod)
	if err != nil {
		return nil, err
	}
	var payload []byte
	for _, target := range nodes {
		part, err := func() ([]byte, error) {
			nodeCtx, _, err := s.one(forNode(ctx, target), info.FullMethod)
			if err != nil {
				return nil, err
			}
			reply, err := handler(nodeCtx, request)
			if err != nil {
				return nil, err
			}
			message, ok := reply.(proto.Message)
			if !ok {
				return nil, status.Errorf(codes.Internal, "%s answered %T", info.FullMethod, reply)
			}
			raw, err := proto.Marshal(message)
			if err != nil {
				return nil, err
			}
			return appendInfo(raw, target)
		}()
		if err != nil {
			part, err = buildError(err, target)
			if err != nil {
				return nil, err
			}
		}
		payload = append(payload, part...)
	}
	if err := proto.Unmarshal(payload, response); err != nil {
		return nil, status.Errorf(codes.Internal, "merging the replies of %s: %v", info.FullMethod, err)
	}
	return response, nil
}

// responseOf is a new, empty response of a method.
func responseOf(method string) (proto.Message, error) {
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	descriptor, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s: %v", method, err)
	}
	serviceDescriptor, ok := descriptor.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, status.Errorf(codes.Internal, "%s is not a service", service)
	}
	methodDescriptor := serviceDescriptor.Methods().ByName(protoreflect.Name(name))
	if methodDescriptor == nil {
		return nil, status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	messageType, err := protoregistry.GlobalTypes.FindMessageByName(methodDescriptor.Output().FullName())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s: %v", method, err)
	}
	return messageType.New().Interface(), nil
}

// appendInfo adds metadata naming the node to the reply's one message.
func appendInfo(response []byte, target string) ([]byte, error) {
	payload, err := proto.Marshal(&common.Empty{Metadata: &common.Metadata{Hostname: target}})
	if err != nil {
		return nil, err
	}
	typ, n1 := protowire.ConsumeVarint(response)
	if n1 < 0 {
		return nil, protowire.ParseError(n1)
	}
	_, n2 := protowire.ConsumeVarint(response[n1:])
	if n2 < 0 {
		return nil, protowire.ParseError(n2)
	}
	if typ != (1<<3)|2 {
		return nil, fmt.Errorf("unexpected message format: %d", typ)
	}
	response = response[n1+n2:]
	prefix := protowire.AppendVarint(protowire.AppendVarint(nil, (1<<3)|2), uint64(len(response)+len(payload)))
	return append(append(prefix, response...), payload...), nil
}

// buildError is a reply that carries a node's error in its metadata.
func buildError(err error, target string) ([]byte, error) {
	return proto.Marshal(&common.EmptyResponse{Messages: []*common.Empty{{
		Metadata: &common.Metadata{Hostname: target, Error: err.Error(), Status: status.Convert(err).Proto()},
	}}})
}
