package app

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/aicr-run/aicr-operator/shared/ociregistry"
)

// dockerCredentials is the login Docker's configuration holds for host, as docker, helm and
// crane find it: $DOCKER_CONFIG/config.json (else ~/.docker/config.json), its auths and its
// credential helpers (credHelpers, credsStore), through go-containerregistry's default keychain.
// No login there is anonymous, not an error. A token login (identitytoken, registrytoken) is not
// one the registry client speaks: it is reported, never printed.
func dockerCredentials(host string) (ociregistry.Credentials, error) {
	reg, err := name.NewRegistry(host)
	if err != nil {
		return ociregistry.Credentials{}, fmt.Errorf("registry %q: %w", host, err)
	}
	auth, err := authn.DefaultKeychain.Resolve(reg)
	if err != nil {
		return ociregistry.Credentials{}, fmt.Errorf("read Docker's login for %s: %w", host, err)
	}
	cfg, err := auth.Authorization()
	if err != nil {
		return ociregistry.Credentials{}, fmt.Errorf("read Docker's login for %s: %w", host, err)
	}
	if cfg.Username == "" && cfg.Password == "" && (cfg.IdentityToken != "" || cfg.RegistryToken != "") {
		return ociregistry.Credentials{}, fmt.Errorf("the login for %s in Docker's config is a token, which the plugin cannot send: give --username and --password-stdin", host)
	}
	return ociregistry.Credentials{Username: cfg.Username, Password: cfg.Password}, nil
}
