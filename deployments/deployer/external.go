package deployer

import (
	"fmt"
	"strings"
)

// ExternalService is one service that external mode expects you to run,
// as docker-compose.yaml runs it for development: its name there, the
// ports the agents and the deployer use, and the deployer's flags and
// environment variable for it.
type ExternalService struct {
	// Name is the service's name in docker-compose.yaml.
	Name string
	// Ports are the container ports used, with what for.
	Ports map[int]string
	// AddressFlag gives its address to the deployer.
	AddressFlag string
	// PasswordEnv holds its password (or PasswordFlag names a file).
	PasswordEnv, PasswordFlag string
	// ServiceEnv is the variable the service itself is started with, when
	// it is not PasswordEnv: ejabberd creates its admin account with a
	// one-time password (on a command line) that the deployer replaces
	// with PasswordEnv's, which ejabberd's container never sees.
	ServiceEnv string
}

// ExternalServices are the services of external mode.
var ExternalServices = []ExternalService{
	{Name: "ejabberd", Ports: map[int]string{5222: "XMPP c2s, the agents (--xmpp-server)", 5443: "admin API, the deployer creates accounts (--ejabberd-api)"},
		AddressFlag: "--xmpp-server", PasswordEnv: "EJABBERD_ADMIN_PASSWORD", PasswordFlag: "--ejabberd-admin-password-file",
		ServiceEnv: "EJABBERD_BOOTSTRAP_PASSWORD"},
	{Name: "redis", Ports: map[int]string{6379: "Redis, the continuum and cluster agents and the API"},
		AddressFlag: "--redis-address", PasswordEnv: "REDIS_PASSWORD", PasswordFlag: "--redis-password-file"},
	{Name: "postgres", Ports: map[int]string{5432: "PostgreSQL, the ML connector's registry (--postgres-database)"},
		AddressFlag: "--postgres-address", PasswordEnv: "POSTGRES_PASSWORD", PasswordFlag: "--postgres-password-file"},
	{Name: "s3", Ports: map[int]string{7070: "S3, the ML connector's model files (--s3-endpoint http://<host>:7070; access key $AWS_ACCESS_KEY_ID or --s3-access-key-file)"},
		AddressFlag: "--s3-endpoint", PasswordEnv: "AWS_SECRET_ACCESS_KEY", PasswordFlag: "--s3-secret-key-file"},
}

// externalHelp describes external mode for --help.
func externalHelp() string {
	var b strings.Builder
	b.WriteString("External services (--services=external; docker-compose.yaml runs them for development):\n")
	for _, s := range ExternalServices {
		var ports []string
		for _, p := range []int{5222, 5443, 6379, 5432, 7070} {
			if what, ok := s.Ports[p]; ok {
				ports = append(ports, fmt.Sprintf("%d %s", p, what))
			}
		}
		fmt.Fprintf(&b, "  %-9s %s; password: $%s or %s\n            ports: %s\n", s.Name, s.AddressFlag, s.PasswordEnv, s.PasswordFlag, strings.Join(ports, "; "))
		if s.ServiceEnv != "" {
			fmt.Fprintf(&b, "            the service starts with $%s (a one-time password the deployer replaces)\n", s.ServiceEnv)
		}
	}
	return b.String()
}
