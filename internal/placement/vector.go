package placement

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// Columns of the resource vectors: every resource name gets a column the
// first time it is seen, process-wide, so that vectors of different
// indexes and requests line up without any per-call conversion. The four
// resources placement always tracks come first.
const (
	colCPU = iota
	colMemory
	colGPU
	colPods
)

var columns = struct {
	sync.RWMutex
	byName map[corev1.ResourceName]int
	names  []corev1.ResourceName
}{
	byName: map[corev1.ResourceName]int{
		corev1.ResourceCPU: colCPU, corev1.ResourceMemory: colMemory, mlsysopsv1.ResourceGPU: colGPU, corev1.ResourcePods: colPods,
	},
	names: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, mlsysopsv1.ResourceGPU, corev1.ResourcePods},
}

// column returns the column of a resource name, giving it one if it has
// none yet.
func column(name corev1.ResourceName) int {
	columns.RLock()
	i, ok := columns.byName[name]
	columns.RUnlock()
	if ok {
		return i
	}
	columns.Lock()
	defer columns.Unlock()
	if i, ok := columns.byName[name]; ok {
		return i
	}
	i = len(columns.names)
	columns.byName[name] = i
	columns.names = append(columns.names, name)
	return i
}

// columnName is the resource name of a column.
func columnName(i int) corev1.ResourceName {
	columns.RLock()
	defer columns.RUnlock()
	return columns.names[i]
}

// vec holds resource amounts in milli-units (the Kubernetes scheduler's
// unit for CPU; exact for every other resource at milli precision), by
// column. A vector shorter than a column holds zero there.
type vec []int64

// vecOf converts a resource list.
func vecOf(list corev1.ResourceList) vec {
	var v vec
	for name, q := range list {
		v = v.grow(column(name) + 1)
		v[column(name)] += q.MilliValue()
	}
	return v
}

// at is the amount in column i.
func (v vec) at(i int) int64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

// grow returns v with at least n columns.
func (v vec) grow(n int) vec {
	if len(v) >= n {
		return v
	}
	out := make(vec, n)
	copy(out, v)
	return out
}

// plus returns a new vector v + k*w; v and w are not modified.
func (v vec) plus(w vec, k int64) vec {
	out := make(vec, max(len(v), len(w)))
	copy(out, v)
	for i, x := range w {
		out[i] += k * x
	}
	return out
}

// addTo adds k*w to v in place, growing it as needed, and returns it.
func (v vec) addTo(w vec, k int64) vec {
	v = v.grow(len(w))
	for i, x := range w {
		v[i] += k * x
	}
	return v
}

// zero reports whether every amount is zero.
func (v vec) zero() bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// Usage is resources counted on nodes beyond what the index knows their
// pods request, by node name: placements made but not visible yet (the
// assumed ledgers), or what the earlier components of an application
// take in a simulated placement. Negative amounts free resources.
type Usage map[string]vec

// Add counts n times list on node.
func (u Usage) Add(node string, list corev1.ResourceList, n int64) {
	u.add(node, vecOf(list), n)
}

func (u Usage) add(node string, v vec, n int64) {
	cur := u[node]
	// A fresh vector: Usages may share vectors with each other.
	u[node] = cur.plus(v, n)
}

// List returns what u counts on node as a resource list (nil when
// nothing).
func (u Usage) List(node string) corev1.ResourceList {
	return listOf(u[node])
}

// listOf converts a vector back into a resource list of the columns that
// are not zero.
func listOf(v vec) corev1.ResourceList {
	var out corev1.ResourceList
	for i, x := range v {
		if x == 0 {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		out[columnName(i)] = quantityOf(columnName(i), x)
	}
	return out
}

// quantityOf is a milli amount of a resource as a quantity: whole units
// where it is whole (binary for memory), milli-units otherwise.
func quantityOf(name corev1.ResourceName, milli int64) resource.Quantity {
	if milli%1000 != 0 {
		return *resource.NewMilliQuantity(milli, resource.DecimalSI)
	}
	format := resource.DecimalSI
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
		format = resource.BinarySI
	}
	return *resource.NewQuantity(milli/1000, format)
}
