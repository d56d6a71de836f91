package kafka

import (
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// The group API keys, on the coordinator in groups.go: FindCoordinator,
// JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
// ListGroups, DeleteGroups. Each needs the principal's read right on the
// group (describe for DescribeGroups and ListGroups, delete for
// DeleteGroups), as Kafka's ACLs do.
func init() {
	register(kmsg.FindCoordinator, 0, 4, now(findCoordinator))
	register(kmsg.JoinGroup, 0, 9, joinGroup)
	register(kmsg.SyncGroup, 0, 5, syncGroup)
	register(kmsg.Heartbeat, 0, 4, now(heartbeat))
	register(kmsg.LeaveGroup, 0, 5, now(leaveGroup))
	register(kmsg.DescribeGroups, 0, 5, now(describeGroups))
	register(kmsg.ListGroups, 0, 4, now(listGroups))
	register(kmsg.DeleteGroups, 0, 2, now(deleteGroups))
}

func groupResource(name string) broker.Resource {
	return broker.Resource{Kind: broker.ResourceGroup, Name: name}
}

// allowGroup returns the Kafka code refusing a on group, or 0.
func (c *conn) allowGroup(a broker.Action, group string) int16 {
	if err := c.s.api.Authorize(c.context(), a, groupResource(group)); err != nil {
		return code(err, scopeGroup)
	}
	return 0
}

func findCoordinator(c *conn, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID = key, -1
		switch {
		case req.CoordinatorType > 1:
			co.ErrorCode = kerr.InvalidRequest.Code
		default:
			// Groups and transactions have one coordinator: the
			// metadata group's leader.
			if req.CoordinatorType == 1 {
				if c.s.api.Authorize(c.context(), broker.ActionDescribe, txnResource(key)) != nil {
					co.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
					break
				}
			} else if code := c.allowGroup(broker.ActionDescribe, key); code != 0 {
				co.ErrorCode = code
				break
			}
			node, err := c.s.api.GroupCoordinator()
			if err != nil {
				co.ErrorCode = kerr.CoordinatorNotAvailable.Code
				break
			}
			found := false
			for _, n := range c.s.nodes() {
				if n.ID == node {
					co.NodeID = int32(n.ID)
					co.Host, co.Port = splitHostPort(n.KafkaAddr)
					found = true
				}
			}
			if !found {
				co.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		co := resp.Coordinators[0]
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.NodeID, co.Host, co.Port
		resp.Coordinators = nil
	}
	return resp
}

func joinGroup(c *conn, r kmsg.Request, a *answer) {
	req := r.(*kmsg.JoinGroupRequest)
	respond := func(resp *kmsg.JoinGroupResponse) { a.respond(resp) }
	fail := func(code int16) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
		a.respond(resp)
	}
	if code := c.allowGroup(broker.ActionRead, req.Group); code != 0 {
		fail(code)
		return
	}
	if code := c.s.checkCoordinator(); code != 0 {
		fail(code)
		return
	}
	c.s.groups.join(c, req, respond)
}

func syncGroup(c *conn, r kmsg.Request, a *answer) {
	req := r.(*kmsg.SyncGroupRequest)
	respond := func(code int16, assignment []byte) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode, resp.MemberAssignment = code, assignment
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
		a.respond(resp)
	}
	if code := c.allowGroup(broker.ActionRead, req.Group); code != 0 {
		respond(code, nil)
		return
	}
	if code := c.s.checkCoordinator(); code != 0 {
		respond(code, nil)
		return
	}
	c.s.groups.sync(req, respond)
}

func heartbeat(c *conn, req *kmsg.HeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if resp.ErrorCode = c.allowGroup(broker.ActionRead, req.Group); resp.ErrorCode != 0 {
		return resp
	}
	if resp.ErrorCode = c.s.checkCoordinator(); resp.ErrorCode != 0 {
		return resp
	}
	resp.ErrorCode = c.s.groups.heartbeat(req)
	return resp
}

func leaveGroup(c *conn, req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode = c.allowGroup(broker.ActionRead, req.Group); resp.ErrorCode != 0 {
		return resp
	}
	if resp.ErrorCode = c.s.checkCoordinator(); resp.ErrorCode != 0 {
		return resp
	}
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	codes := c.s.groups.leave(req.Group, members)
	if req.Version < 3 {
		resp.ErrorCode = codes[0]
		return resp
	}
	for i, m := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func describeGroups(c *conn, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	coord := c.s.checkCoordinator()
	for _, name := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = name
		denied := c.allowGroup(broker.ActionDescribe, name)
		switch {
		case denied != 0:
			d.ErrorCode = denied
		case coord != 0:
			d.ErrorCode = coord
		default:
			if g, ok := c.s.groups.describe(name); ok {
				d = g
				break
			}
			// No Kafka members: Dead, or Empty with committed offsets
			// (a Hermes group's live members show as Stable, without
			// Kafka member details).
			d.State = "Dead"
			if hd, err := c.s.api.DescribeGroup(c.context(), name); err == nil {
				d.State = "Empty"
				if len(hd.Members) > 0 {
					d.State = "Stable"
					d.ProtocolType = "hermes"
				}
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

func listGroups(c *conn, req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if resp.ErrorCode = c.s.checkCoordinator(); resp.ErrorCode != 0 {
		return resp
	}
	kafka := c.s.groups.list()
	seen := map[string]bool{}
	var out []kmsg.ListGroupsResponseGroup
	add := func(name, ptype, state string) {
		if seen[name] || c.allowGroup(broker.ActionDescribe, name) != 0 {
			return
		}
		if len(req.StatesFilter) > 0 && !contains(req.StatesFilter, state) {
			return
		}
		seen[name] = true
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState = name, ptype, state
		out = append(out, g)
	}
	for name, v := range kafka {
		add(name, v[0], v[1])
	}
	if groups, err := c.s.api.ListGroups(c.context()); err == nil {
		for _, g := range groups {
			state, ptype := "Empty", "consumer"
			if g.Members > 0 {
				state, ptype = "Stable", "hermes"
			}
			add(g.Name, ptype, state)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	resp.Groups = out
	return resp
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deleteGroups deletes groups' committed offsets, for groups with no
// Kafka members (NON_EMPTY_GROUP otherwise, as Kafka).
func deleteGroups(c *conn, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	coord := c.s.checkCoordinator()
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = name
		denied := c.allowGroup(broker.ActionDelete, name)
		switch {
		case denied != 0:
			g.ErrorCode = denied
		case coord != 0:
			g.ErrorCode = coord
		case c.s.groups.hasMembers(name):
			g.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			err := c.s.api.DeleteGroup(c.context(), name)
			switch {
			case errors.Is(err, broker.ErrGroupNotFound):
				g.ErrorCode = kerr.GroupIDNotFound.Code
			case err != nil:
				g.ErrorCode = code(err, scopeGroup)
				g.ErrorMessage = message(err)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
