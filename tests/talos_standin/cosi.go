package main

import (
	"context"

	"github.com/cosi-project/runtime/api/v1alpha1"
)

// The COSI State API. The interceptors routed the call to one node (a COSI call is never
// fanned out: apid refuses "nodes" for it) and checked the role; the node's own State
// API (cosi-project/runtime pkg/state/protobuf/server, as machined registers it) answers
// behind Talos's access policy, so a missing resource is NotFound, an unregistered type
// PermissionDenied, and a Watch sees every change a control line makes.

func (api stateAPI) Get(ctx context.Context, request *v1alpha1.GetRequest) (*v1alpha1.GetResponse, error) {
	n := nodeOf(ctx)
	response, err := n.cosiAPI.Get(ctx, request)
	api.s.logCOSI("cosi-get", n, request.GetNamespace(), request.GetType(), request.GetId(), err)
	return response, err
}

func (api stateAPI) List(request *v1alpha1.ListRequest, stream v1alpha1.State_ListServer) error {
	n := nodeOf(stream.Context())
	err := n.cosiAPI.List(request, stream)
	api.s.logCOSI("cosi-list", n, request.GetNamespace(), request.GetType(), "", err)
	return err
}

func (api stateAPI) Watch(request *v1alpha1.WatchRequest, stream v1alpha1.State_WatchServer) error {
	n := nodeOf(stream.Context())
	api.s.logCOSI("cosi-watch", n, request.GetNamespace(), request.GetType(), request.GetId(), nil)
	return n.cosiAPI.Watch(request, stream)
}

func (api stateAPI) Create(ctx context.Context, request *v1alpha1.CreateRequest) (*v1alpha1.CreateResponse, error) {
	return nodeOf(ctx).cosiAPI.Create(ctx, request)
}

func (api stateAPI) Update(ctx context.Context, request *v1alpha1.UpdateRequest) (*v1alpha1.UpdateResponse, error) {
	return nodeOf(ctx).cosiAPI.Update(ctx, request)
}

func (api stateAPI) Destroy(ctx context.Context, request *v1alpha1.DestroyRequest) (*v1alpha1.DestroyResponse, error) {
	return nodeOf(ctx).cosiAPI.Destroy(ctx, request)
}

func (s *server) logCOSI(call string, n *node, namespace, typ, id string, err error) {
	fields := map[string]any{"namespace": namespace, "type": typ, "id": id, "served": err == nil}
	if err != nil {
		fields["error"] = err.Error()
	}
	s.log(call, n, fields)
}
