// Package validate checks the Kubernetes manifests of deploy/k8s offline:
// every object decodes strictly (no unknown or misspelt field, every value
// of the right type) into the Kubernetes API's Go types, the
// kustomization renders as `kubectl apply -k` would, the references
// between objects hold, and scaling the cluster from 3 nodes to 5 gives
// every new pod the configuration that docs/OPERATIONS.md prescribes for
// a joining node.
//
// It is a module of its own so that the broker does not depend on the
// Kubernetes libraries: `make k8s-validate`.
package validate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	k8sDir   = ".."
	repoRoot = "../../.."
	// imageUID is the user of deploy/image/passwd that owns /data.
	imageUID = 65532
)

// manifests are the objects of the rendered kustomization.
type manifests struct {
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	pdbs         []*policyv1.PodDisruptionBudget
}

// render builds deploy/k8s as `kubectl kustomize` does and decodes every
// object strictly into its API type.
func render(t *testing.T) *manifests {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), k8sDir)
	if err != nil {
		t.Fatalf("kustomize build deploy/k8s: %v", err)
	}
	m := &manifests{}
	for _, r := range resMap.Resources() {
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind := r.GetKind()
		name := kind + "/" + r.GetName()
		var obj any
		switch r.GetApiVersion() + " " + kind {
		case "apps/v1 StatefulSet":
			s := &appsv1.StatefulSet{}
			m.statefulSets, obj = append(m.statefulSets, s), s
		case "v1 Service":
			s := &corev1.Service{}
			m.services, obj = append(m.services, s), s
		case "policy/v1 PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			m.pdbs, obj = append(m.pdbs, p), p
		default:
			t.Fatalf("%s: %s is not a kind this test knows; add it", name, r.GetApiVersion())
		}
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			t.Errorf("%s does not decode strictly as %s: %v", name, r.GetApiVersion(), err)
		}
	}
	return m
}

// TestFilesDecodeStrictly decodes each file as written (not only as
// rendered), document by document.
func TestFilesDecodeStrictly(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	if len(files) < 4 {
		t.Fatalf("found %d manifests in deploy/k8s", len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---")) {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Errorf("%s, document %d: %v", f, i, err)
				continue
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 StatefulSet":
				obj = &appsv1.StatefulSet{}
			case "v1 Service":
				obj = &corev1.Service{}
			case "policy/v1 PodDisruptionBudget":
				obj = &policyv1.PodDisruptionBudget{}
			case "kustomize.config.k8s.io/v1beta1 Kustomization":
				continue // rendered by render
			default:
				t.Errorf("%s, document %d: unknown %q %q", f, i, head.APIVersion, head.Kind)
				continue
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s, document %d (%s): %v", f, i, head.Kind, err)
			}
		}
	}
}

// TestObjects checks, for what was rendered, the rules of the API
// server's validation that decoding alone does not: names, labels,
// selectors, ports, probes, environment variables, and the references
// between the objects.
func TestObjects(t *testing.T) {
	m := render(t)
	if len(m.statefulSets) != 2 || len(m.services) != 2 || len(m.pdbs) != 1 {
		t.Fatalf("rendered %d StatefulSets, %d Services, %d PodDisruptionBudgets; want 2, 2, 1",
			len(m.statefulSets), len(m.services), len(m.pdbs))
	}
	svcs := map[string]*corev1.Service{}
	for _, s := range m.services {
		svcs[s.Name] = s
		checkMeta(t, "Service "+s.Name, s.ObjectMeta)
	}
	var podLabels []labels.Set
	for _, s := range m.statefulSets {
		what := "StatefulSet " + s.Name
		checkMeta(t, what, s.ObjectMeta)
		spec := s.Spec
		if spec.Replicas == nil || *spec.Replicas < 0 {
			t.Errorf("%s: replicas must be set and not negative", what)
		}
		if spec.Ordinals == nil || spec.Ordinals.Start < 1 {
			t.Errorf("%s: spec.ordinals.start must be at least 1: the pod index is the node id, which is positive", what)
		}
		sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("%s: selector %v: %v", what, spec.Selector, err)
		} else if !sel.Matches(labels.Set(spec.Template.Labels)) {
			t.Errorf("%s: selector %v does not match the template's labels %v (the API server refuses it)", what, sel, spec.Template.Labels)
		}
		podLabels = append(podLabels, labels.Set(spec.Template.Labels))
		hs := svcs[spec.ServiceName]
		if hs == nil || hs.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("%s: serviceName %q is not a headless Service of the manifests", what, spec.ServiceName)
		} else if !hs.Spec.PublishNotReadyAddresses {
			t.Errorf("%s: headless Service %s must publish not-ready addresses, or the nodes cannot find each other to become ready", what, hs.Name)
		}
		if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("%s: podManagementPolicy %q; a node is ready only once a quorum runs, so the pods must start in parallel", what, spec.PodManagementPolicy)
		}
		pod := spec.Template.Spec
		if sc := pod.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != imageUID || sc.FSGroup == nil || *sc.FSGroup != imageUID {
			t.Errorf("%s: the pod must run as the image's user %d with fsGroup %d", what, imageUID, imageUID)
		}
		if len(pod.Containers) != 1 {
			t.Fatalf("%s: %d containers", what, len(pod.Containers))
		}
		c := pod.Containers[0]
		if len(c.Command) != 0 {
			t.Errorf("%s: command %v overrides the image's entrypoint /hermes (the image has nothing else to run)", what, c.Command)
		}
		if !slices.Equal(c.Args, []string{"serve"}) {
			t.Errorf("%s: args %v, want [serve]", what, c.Args)
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			for _, e := range validation.IsValidPortName(p.Name) {
				t.Errorf("%s: port name %q: %s", what, p.Name, e)
			}
			ports[p.Name] = p.ContainerPort
		}
		for name, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if pr == nil || pr.HTTPGet == nil {
				t.Errorf("%s: no HTTP %s probe", what, name)
				continue
			}
			if _, ok := ports[pr.HTTPGet.Port.StrVal]; pr.HTTPGet.Port.Type != intstr.String || !ok {
				t.Errorf("%s: %s probe port %v is not a named container port", what, name, pr.HTTPGet.Port)
			}
		}
		if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness probe on %s, want /readyz", what, c.ReadinessProbe.HTTPGet.Path)
		}
		checkEnv(t, what, c.Env)
		for _, svc := range m.services {
			for _, sp := range svc.Spec.Ports {
				if _, ok := ports[sp.TargetPort.StrVal]; !ok {
					t.Errorf("Service %s: targetPort %v is not a port of %s", svc.Name, sp.TargetPort, what)
				}
			}
		}
		mounted := false
		for _, vm := range c.VolumeMounts {
			mounted = mounted || (vm.MountPath == "/data" && slices.ContainsFunc(spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == vm.Name }))
		}
		if !mounted {
			t.Errorf("%s: /data is not a volume claim template's mount", what)
		}
	}
	for _, svc := range m.services {
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for _, pl := range podLabels {
			if !sel.Matches(pl) {
				t.Errorf("Service %s: selector %v misses pods labelled %v", svc.Name, sel, pl)
			}
		}
	}
	pdb := m.pdbs[0]
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range podLabels {
		if !sel.Matches(pl) {
			t.Errorf("PodDisruptionBudget %s: selector %v misses pods labelled %v", pdb.Name, sel, pl)
		}
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want 1", pdb.Name, pdb.Spec.MaxUnavailable)
	}
}

func checkMeta(t *testing.T, what string, om metav1.ObjectMeta) {
	t.Helper()
	for _, e := range validation.IsDNS1123Subdomain(om.Name) {
		t.Errorf("%s: name: %s", what, e)
	}
	for k, v := range om.Labels {
		for _, e := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			t.Errorf("%s: label %s=%s: %s", what, k, v, e)
		}
	}
}

// envFieldPaths are the fields the downward API gives environment
// variables (labels and annotations by key, checked apart).
var envFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
	"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}

var labelPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

// checkEnv checks names, downward API paths, and that every $(VAR) refers
// to a variable defined before it (Kubernetes leaves others as written).
func checkEnv(t *testing.T, what string, env []corev1.EnvVar) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range env {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			t.Errorf("%s: env %s: %s", what, e.Name, msg)
		}
		if seen[e.Name] {
			t.Errorf("%s: env %s set twice", what, e.Name)
		}
		if e.ValueFrom != nil {
			fr := e.ValueFrom.FieldRef
			if fr == nil {
				t.Errorf("%s: env %s: only fieldRef is expected here", what, e.Name)
			} else if m := labelPath.FindStringSubmatch(fr.FieldPath); m != nil {
				for _, msg := range validation.IsQualifiedName(m[2]) {
					t.Errorf("%s: env %s: key %q: %s", what, e.Name, m[2], msg)
				}
			} else if !slices.Contains(envFieldPaths, fr.FieldPath) {
				t.Errorf("%s: env %s: %q is not a field the downward API gives environment variables", what, e.Name, fr.FieldPath)
			}
		}
		for _, ref := range varRef.FindAllStringSubmatch(e.Value, -1) {
			if !seen[ref[1]] {
				t.Errorf("%s: env %s refers to $(%s), which is not defined before it", what, e.Name, ref[1])
			}
		}
		seen[e.Name] = true
	}
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// pod is what one pod of a StatefulSet is started with: its name and the
// environment the kubelet computes for it.
type pod struct {
	name string
	env  map[string]string
}

// pods simulates the pods a StatefulSet has at the given replicas: names
// from the ordinals, the pod-index label, and the kubelet's expansion of
// $(VAR) in values.
func pods(t *testing.T, s *appsv1.StatefulSet, replicas int32) []pod {
	t.Helper()
	start := int32(0)
	if s.Spec.Ordinals != nil {
		start = s.Spec.Ordinals.Start
	}
	var out []pod
	for ord := start; ord < start+replicas; ord++ {
		name := fmt.Sprintf("%s-%d", s.Name, ord)
		lbls := map[string]string{"apps.kubernetes.io/pod-index": strconv.Itoa(int(ord)), "statefulset.kubernetes.io/pod-name": name}
		for k, v := range s.Spec.Template.Labels {
			lbls[k] = v
		}
		env := map[string]string{}
		for _, e := range s.Spec.Template.Spec.Containers[0].Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
				fp := e.ValueFrom.FieldRef.FieldPath
				if m := labelPath.FindStringSubmatch(fp); m != nil && m[1] == "labels" {
					env[e.Name] = lbls[m[2]]
				} else if fp == "metadata.name" {
					env[e.Name] = name
				} else {
					env[e.Name] = "<" + fp + ">"
				}
			default:
				env[e.Name] = varRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
					if v, ok := env[ref[2:len(ref)-1]]; ok {
						return v
					}
					return ref
				})
			}
		}
		out = append(out, pod{name: name, env: env})
	}
	return out
}

// nodeConfig is what `hermes serve` makes of a pod's HERMES_* variables:
// its node id, its peers and --join, with the checks serve makes before
// it starts (cmd/hermes/serve.go: parsePeers and --join's).
func nodeConfig(p pod) (id uint64, peers map[uint64]string, join bool, err error) {
	id, err = strconv.ParseUint(p.env["HERMES_NODE_ID"], 10, 64)
	if err != nil || id == 0 {
		return 0, nil, false, fmt.Errorf("HERMES_NODE_ID=%q: --node-id must be a positive integer", p.env["HERMES_NODE_ID"])
	}
	if v, ok := p.env["HERMES_JOIN"]; ok {
		if join, err = strconv.ParseBool(v); err != nil {
			return 0, nil, false, fmt.Errorf("HERMES_JOIN=%q: %v", v, err)
		}
	}
	raw := p.env["HERMES_PEERS"]
	if raw == "" {
		if join {
			return 0, nil, false, fmt.Errorf("--join needs --peers")
		}
		return id, nil, false, nil
	}
	peers = map[uint64]string{}
	for _, e := range strings.Split(raw, ",") {
		idStr, addr, ok := strings.Cut(strings.TrimSpace(e), "=")
		pid, perr := strconv.ParseUint(idStr, 10, 64)
		if !ok || perr != nil || pid == 0 || addr == "" {
			return 0, nil, false, fmt.Errorf("--peers: %q is not id=host:port", e)
		}
		if _, dup := peers[pid]; dup {
			return 0, nil, false, fmt.Errorf("--peers: node %d named twice", pid)
		}
		peers[pid] = addr
	}
	if _, ok := peers[id]; !ok {
		return 0, nil, false, fmt.Errorf("--peers does not name this node (%d)", id)
	}
	return id, peers, join, nil
}

func statefulSet(t *testing.T, m *manifests, name string) *appsv1.StatefulSet {
	t.Helper()
	for _, s := range m.statefulSets {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no StatefulSet %s", name)
	return nil
}

// TestScaleThreeToFive checks the manifests against docs/OPERATIONS.md's
// procedure for adding nodes: the founding nodes bootstrap from a list
// naming exactly themselves; scaling hermes-join from 0 to 2 gives nodes
// 4 and 5, each started with --join and --peers naming the cluster's
// nodes and itself at the address that `hermes cluster join --raft-addr`
// is given in the documentation; and scaling the founders' StatefulSet
// instead is refused by the node, as the documentation says.
func TestScaleThreeToFive(t *testing.T) {
	m := render(t)
	founders, joiners := statefulSet(t, m, "hermes"), statefulSet(t, m, "hermes-join")
	if *founders.Spec.Replicas != 3 || *joiners.Spec.Replicas != 0 {
		t.Fatalf("replicas: hermes %d, hermes-join %d; want 3 and 0", *founders.Spec.Replicas, *joiners.Spec.Replicas)
	}
	svc := founders.Spec.ServiceName
	dns := func(p pod) string { return p.name + "." + svc + ":7000" }

	// The founding nodes: ids 1..3, bootstrapping from exactly themselves.
	var founderIDs []uint64
	for _, p := range pods(t, founders, 3) {
		id, peers, join, err := nodeConfig(p)
		if err != nil {
			t.Fatalf("%s would not start: %v", p.name, err)
		}
		if join {
			t.Errorf("%s: a founding node must not --join (nothing would bootstrap the cluster)", p.name)
		}
		if len(peers) != 3 || peers[id] != dns(p) {
			t.Errorf("%s: node %d, peers %v: want the 3 founders, this one at %s", p.name, id, peers, dns(p))
		}
		founderIDs = append(founderIDs, id)
	}
	if !slices.Equal(founderIDs, []uint64{1, 2, 3}) {
		t.Errorf("founding node ids %v, want [1 2 3]", founderIDs)
	}

	// Scaling to 5: hermes-join to 2 replicas.
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("kubectl scale statefulset hermes-join --replicas 2")) {
		t.Errorf("docs/OPERATIONS.md does not say how to scale 3 to 5 (kubectl scale statefulset hermes-join --replicas 2)")
	}
	if !bytes.Contains(doc, []byte("--join")) {
		t.Errorf("docs/OPERATIONS.md does not describe --join")
	}
	ids := map[uint64]string{1: "", 2: "", 3: ""}
	for _, p := range pods(t, joiners, 2) {
		id, peers, join, err := nodeConfig(p)
		if err != nil {
			t.Fatalf("%s would not start: %v", p.name, err)
		}
		if _, dup := ids[id]; dup {
			t.Errorf("%s: node id %d is taken already", p.name, id)
		}
		ids[id] = p.name
		if !join {
			t.Errorf("%s: a node added to a running cluster must start with --join (it would bootstrap a metadata group of its own)", p.name)
		}
		for _, f := range founderIDs {
			if peers[f] == "" {
				t.Errorf("%s: --peers does not name founding node %d (where the cluster is)", p.name, f)
			}
		}
		if peers[id] != dns(p) {
			t.Errorf("%s: its own --peers entry is %q, want %q", p.name, peers[id], dns(p))
		}
		// The command the documentation gives for this node.
		cmd := fmt.Sprintf("hermes cluster join --node-id %d --raft-addr %s", id, dns(p))
		if !bytes.Contains(doc, []byte(cmd)) {
			t.Errorf("docs/OPERATIONS.md does not give the command that adds %s: %q", p.name, cmd)
		}
	}
	if len(ids) != 5 {
		t.Errorf("node ids %v: want 5 distinct", ids)
	}

	// Scaling the founders instead: the new pod must be refused, not
	// bootstrap anything.
	extra := pods(t, founders, 4)[3]
	if _, _, _, err := nodeConfig(extra); err == nil || !strings.Contains(err.Error(), "does not name this node") {
		t.Errorf("%s (the founders scaled to 4) would start (%v); the documentation says it is refused", extra.name, err)
	}
}
