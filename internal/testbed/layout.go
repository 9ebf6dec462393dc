package testbed

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// Ports are offsets from Options.PortBase. Member cluster i uses the ten
// ports from PortBase+100+10*i.
const (
	portEtcd            = 0
	portEtcdPeer        = 1
	portHostAPIServer   = 10
	portHostKCM         = 11
	portKarmadaCMPprof  = 12 // Go's profiles of karmada-controller-manager (loopback)
	portKarmadaSchedPpr = 13 // ... and of karmada-scheduler
	portKarmadaAPI      = 20
	portKarmadaAgg      = 21
	portKarmadaWebhook  = 22
	portKarmadaKCM      = 23
	portKarmadaCMMetric = 24
	portKarmadaCMHealth = 25
	portKarmadaSchedMet = 26
	portKarmadaSchedHlt = 27
	portWebhookMetrics  = 28
	portWebhookHealth   = 29
	portRedis           = 30
	portAdmission       = 32 // the testbed's admission webhook for real nodes
	portHostScheduler   = 33
	portPostgres        = 34 // ejabberd's data (database ejabberd); other components add their own databases (the ML connector's)
	portAccounts        = 35 // the accounts reconciler's /metrics, /readyz and /status
	portS3              = 38 // the ML connector's object store
	portMLConnector     = 39 // the ML connector (8090 at the default port base)
	portEjabberd        = 40 // to 49
	portMembers         = 100

	memberAPIServer = 0
	memberKCM       = 1
	memberScheduler = 2
	memberKwok      = 3
	memberKwokMet   = 4
)

// Context names in the kubeconfig the testbed writes.
const (
	ContextHost    = "karmada-host"
	ContextKarmada = "karmada-apiserver"
)

// layout knows where every file of the testbed lives and which port every
// component uses.
type layout struct {
	state string
	base  int
}

func (l layout) path(parts ...string) string {
	return filepath.Join(append([]string{l.state}, parts...)...)
}

func (l layout) port(offset int) int { return l.base + offset }

func (l layout) addr(offset int) string { return "127.0.0.1:" + strconv.Itoa(l.base+offset) }

func (l layout) memberPort(i, offset int) int { return l.base + portMembers + 10*i + offset }

func (l layout) url(offset int) string { return fmt.Sprintf("https://127.0.0.1:%d", l.base+offset) }

// apiServerURL is the URL of the apiserver of a kubeconfig context: on the
// host's address on the testbed bridge, which real nodes and their pods
// reach (see netPlan).
func (tb *Testbed) apiServerURL(context string) string {
	return fmt.Sprintf("https://%s:%d", tb.net.HostIP(), tb.apiServerPort(context))
}
