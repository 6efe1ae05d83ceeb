package main

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// Member states a test can set.
const (
	memberHealthy = "healthy" // its etcd answers
	memberDown    = "down"    // its etcd does not answer (a stopped or crashed etcd)
	memberRemoved = "removed" // no longer a member: gone from the member list
)

// The etcd release Talos 1.13 and 1.14 run, as a member reports it.
const (
	etcdVersion        = "3.6.7"
	etcdStorageVersion = "3.6.0"
	// what machined's local etcd client meets when etcd does not listen (localhost:2379)
	localEtcdRefused = `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:2379: connect: connection refused"`
)

type member struct {
	id           uint64
	node         *node
	peerURLs     []string
	clientURLs   []string
	state        string
	learner      bool
	errors       []string
	alarms       []string // NOSPACE, CORRUPT
	downByReboot bool
}

// memberSettings is what a control line may change of a member; nil leaves it.
type memberSettings struct {
	State   *string   `json:"state,omitempty"`
	Learner *bool     `json:"learner,omitempty"`
	Errors  *[]string `json:"errors,omitempty"`
	Alarms  *[]string `json:"alarms,omitempty"`
}

// etcdCluster is the one etcd of the control plane nodes, as their machined's etcd
// client sees it. Simplified: membership and health are set, not negotiated; a rebooting
// member leaves and comes back healthy after -config etcdRejoin, with its ID and without
// a learner phase (Talos keeps the member across an upgrade; a new member would join as
// a learner first); the raft term moves when the leader changes.
type etcdCluster struct {
	mu      sync.Mutex
	members []*member
	rejoin  time.Duration
	term    uint64
	index   uint64
	leader  uint64
}

// memberID is a member's ID, the same for a name at every run.
func memberID(name string) uint64 {
	sum := sha256.Sum256([]byte("etcd member " + name))
	return binary.BigEndian.Uint64(sum[:8]) | 1
}

func newEtcdCluster(nodes []*node, rejoin time.Duration) *etcdCluster {
	c := &etcdCluster{rejoin: rejoin, term: 2, index: 1000}
	for _, n := range nodes {
		if !n.controlPlane {
			continue
		}
		c.members = append(c.members, &member{
			id: memberID(n.name), node: n, state: memberHealthy,
			peerURLs:   []string{"https://" + net.JoinHostPort(n.address, "2380")},
			clientURLs: []string{"https://" + net.JoinHostPort(n.address, "2379")},
		})
	}
	c.elect()
	return c
}

func (c *etcdCluster) find(name string) *member {
	for _, m := range c.members {
		if m.node.name == name {
			return m
		}
	}
	return nil
}

// elect keeps the leader while it is a healthy voter; else the first healthy voter leads
// when a majority of the voters is healthy (c.mu held).
func (c *etcdCluster) elect() {
	var voters, healthy int
	var first *member
	leaderOK := false
	for _, m := range c.members {
		if m.state == memberRemoved || m.learner {
			continue
		}
		voters++
		if m.state == memberHealthy {
			healthy++
			if first == nil {
				first = m
			}
			if m.id == c.leader {
				leaderOK = true
			}
		}
	}
	switch {
	case voters == 0 || healthy*2 <= voters:
		c.leader = 0
	case !leaderOK:
		c.leader = first.id
		c.term++
	}
	c.index++
}

func (c *etcdCluster) set(name string, settings memberSettings) error {
	if settings.State != nil && !slices.Contains([]string{memberHealthy, memberDown, memberRemoved}, *settings.State) {
		return fmt.Errorf("member state %q is not healthy, down or removed", *settings.State)
	}
	if settings.Alarms != nil {
		for _, alarm := range *settings.Alarms {
			if _, ok := machine.EtcdMemberAlarm_AlarmType_value[alarm]; !ok || alarm == "NONE" {
				return fmt.Errorf("alarm %q is not NOSPACE or CORRUPT", alarm)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.find(name)
	if m == nil {
		return fmt.Errorf("node %s has no etcd member (only control plane nodes do)", name)
	}
	if settings.State != nil {
		m.state, m.downByReboot = *settings.State, false
	}
	if settings.Learner != nil {
		m.learner = *settings.Learner
	}
	if settings.Errors != nil {
		m.errors = slices.Clone(*settings.Errors)
	}
	if settings.Alarms != nil {
		m.alarms = slices.Clone(*settings.Alarms)
	}
	c.elect()
	return nil
}

// nodeDown: the node reboots, its etcd stops with it.
func (c *etcdCluster) nodeDown(n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.find(n.name); m != nil && m.state == memberHealthy {
		m.state, m.downByReboot = memberDown, true
		c.elect()
	}
}

// nodeBooted: the node is back; its etcd rejoins after the rejoin delay.
func (c *etcdCluster) nodeBooted(n *node, log func(string, *node, map[string]any)) {
	rejoin := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if m := c.find(n.name); m != nil && m.downByReboot {
			m.state, m.downByReboot = memberHealthy, false
			c.elect()
			log("etcd-rejoined", n, map[string]any{"member": fmt.Sprintf("%016x", m.id)})
		}
	}
	if c.rejoin <= 0 {
		rejoin()
		return
	}
	time.AfterFunc(c.rejoin, rejoin)
}

// local is the member of node n's own etcd, or the error machined's local client meets.
func (c *etcdCluster) local(n *node) (*member, error) {
	m := c.find(n.name)
	if m == nil || m.state != memberHealthy {
		return nil, status.Error(codes.Unavailable, localEtcdRefused)
	}
	return m, nil
}

// memberList is MachineService.EtcdMemberList
// (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go): the local etcd's
// MemberList (QueryLocal, as `talosctl etcd members` asks) or any control plane's,
// requiring a leader.
func (c *etcdCluster) memberList(n *node, queryLocal bool) ([]*machine.EtcdMember, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if queryLocal {
		if _, err := c.local(n); err != nil {
			return nil, err
		}
	}
	if c.leader == 0 {
		return nil, status.Error(codes.Unavailable, "etcdserver: no leader")
	}
	var members []*machine.EtcdMember
	for _, m := range c.members {
		if m.state == memberRemoved {
			continue
		}
		members = append(members, &machine.EtcdMember{
			Id: m.id, Hostname: m.node.name, PeerUrls: m.peerURLs, ClientUrls: m.clientURLs, IsLearner: m.learner,
		})
	}
	return members, nil
}

// memberStatus is MachineService.EtcdStatus: the local etcd's Status, with the errors
// etcd itself adds (no leader, each alarm: server/etcdserver/api/v3rpc/maintenance.go).
func (c *etcdCluster) memberStatus(n *node) (*machine.EtcdMemberStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.local(n)
	if err != nil {
		return nil, status.Error(codes.Unknown, "failed to query etcd status: "+err.Error())
	}
	errors := slices.Clone(m.errors)
	if c.leader == 0 {
		errors = append(errors, "etcdserver: no leader")
	}
	for _, other := range c.members {
		if other.state == memberRemoved {
			continue
		}
		for _, alarm := range other.alarms {
			errors = append(errors, fmt.Sprintf("memberID:%d alarm:%s", other.id, alarm))
		}
	}
	return &machine.EtcdMemberStatus{
		MemberId: m.id, ProtocolVersion: etcdVersion, StorageVersion: etcdStorageVersion,
		DbSize: 24 << 20, DbSizeInUse: 11 << 20, Leader: c.leader,
		RaftIndex: c.index, RaftTerm: c.term, RaftAppliedIndex: c.index,
		Errors: errors, IsLearner: m.learner,
	}, nil
}

// alarmList is MachineService.EtcdAlarmList: the cluster's alarms, from the local etcd.
func (c *etcdCluster) alarmList(n *node) ([]*machine.EtcdMemberAlarm, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.local(n); err != nil {
		return nil, status.Error(codes.Unknown, "failed to list etcd alarms: "+err.Error())
	}
	var alarms []*machine.EtcdMemberAlarm
	for _, m := range c.members {
		if m.state == memberRemoved {
			continue
		}
		for _, alarm := range m.alarms {
			alarms = append(alarms, &machine.EtcdMemberAlarm{
				MemberId: m.id, Alarm: machine.EtcdMemberAlarm_AlarmType(machine.EtcdMemberAlarm_AlarmType_value[alarm]),
			})
		}
	}
	return alarms, nil
}

// view is the cluster as the tests read it back.
func (c *etcdCluster) view() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	members := []map[string]any{}
	for _, m := range c.members {
		members = append(members, map[string]any{
			"node": m.node.name, "id": fmt.Sprintf("%016x", m.id), "state": m.state, "learner": m.learner,
			"errors": append([]string{}, m.errors...), "alarms": append([]string{}, m.alarms...),
		})
	}
	return map[string]any{"leader": fmt.Sprintf("%016x", c.leader), "term": c.term, "members": members}
}
