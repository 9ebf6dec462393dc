package server

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	valid := func() *Options {
		o := NewOptions()
		o.TokenFile, o.DatabaseURL = "tokens.csv", "postgres://u:p@127.0.0.1:5432/db"
		return o
	}
	cases := map[string]struct {
		change func(o *Options)
		want   []string
	}{
		"defaults with a token file and a database": {change: func(*Options) {}},
		"nothing":                  {change: func(o *Options) { o.TokenFile, o.DatabaseURL = "", "" }, want: []string{"no token source", "no database"}},
		"two token sources":        {change: func(o *Options) { o.TokenSecret = "ns/name" }, want: []string{"exclude each other"}},
		"bad secret":               {change: func(o *Options) { o.TokenFile, o.TokenSecret = "", "name" }, want: []string{"want namespace/name"}},
		"bad listen":               {change: func(o *Options) { o.Listen = "8090" }, want: []string{"--listen"}},
		"s3 without an endpoint":   {change: func(o *Options) { o.Store = StoreS3 }, want: []string{"--s3-endpoint", "no S3 credentials"}},
		"unknown store":            {change: func(o *Options) { o.Store = "tape" }, want: []string{"--artifact-store"}},
		"northbound without token": {change: func(o *Options) { o.NorthboundURL = "http://127.0.0.1:8000" }, want: []string{"operator token", "--model-server-image"}},
		"bad northbound URL":       {change: func(o *Options) { o.NorthboundURL, o.NorthboundToken, o.ModelServerImage = "ftp://x", "t", "i" }, want: []string{"--northbound-url"}},
		"bad access":               {change: func(o *Options) { o.Access = "magic" }, want: []string{"--access"}},
		"bad download URL":         {change: func(o *Options) { o.DownloadURL = "10.0.0.1:8090" }, want: []string{"--download-url"}},
		"zero timeouts":            {change: func(o *Options) { o.RequestTimeout, o.DBWait = 0, 0 }, want: []string{"--request-timeout", "--db-wait"}},
		"negative drift interval":  {change: func(o *Options) { o.DriftInterval = -1 }, want: []string{"must not be negative"}},
		"negative shutdown delay":  {change: func(o *Options) { o.ShutdownDelay = -1 }, want: []string{"--shutdown-delay must not be negative"}},
		"tiny limits":              {change: func(o *Options) { o.MaxBodyBytes, o.MaxUploadBytes = 10, 10 }, want: []string{"--max-body-bytes", "--max-upload-bytes"}},
		"bad log settings":         {change: func(o *Options) { o.LogLevel, o.LogFormat = "loud", "xml" }, want: []string{"--log-level", "--log-format"}},
	}
	for name, c := range cases {
		o := valid()
		c.change(o)
		err := o.Validate()
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", name, err, w)
			}
		}
	}
}

func TestUpstreamEnvironment(t *testing.T) {
	t.Setenv("POSTGRES_USER", "mlc")
	t.Setenv("POSTGRES_PASSWORD", "p@ss")
	t.Setenv("DB_HOST_NAME", "db")
	t.Setenv("POSTGRES_DB", "mlconnector")
	t.Setenv("AWS_ACCESS_URL", "http://s3:9000")
	t.Setenv("AWS_S3_BUCKET_DATA", "models")
	t.Setenv("NOTHBOUND_API_ENDPOINT", "http://nb:8000")
	o := NewOptions()
	if o.DatabaseURL != "postgres://mlc:p%40ss@db:5432/mlconnector?sslmode=disable" {
		t.Errorf("database URL %q", o.DatabaseURL)
	}
	if o.Store != StoreS3 || o.S3Endpoint != "http://s3:9000" || o.S3Bucket != "models" || o.NorthboundURL != "http://nb:8000" {
		t.Errorf("store %s endpoint %s bucket %s northbound %s", o.Store, o.S3Endpoint, o.S3Bucket, o.NorthboundURL)
	}
}
