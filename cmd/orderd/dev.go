package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/pglocal"
	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store"
)

const (
	devDir          = ".orderd"
	devDatabase     = "orderd_dev"
	devSecretFile   = "jwt-secret"
	devEnvFile      = "env"
	demoMerchant    = "Autumn Milk Tea (demo)"
	demoTea         = "Osmanthus oolong milk tea"
	demoLimitedItem = "First cup of autumn (limited)"
	devTokenTTL     = 7 * 24 * time.Hour
	// A sign-in link waits an hour for its click (a developer reads the
	// README first); the page's token then lasts a working day.
	devSignInTTL      = time.Hour
	devSignInTokenTTL = 12 * time.Hour
)

// demoMenu is the demo merchant's menu after its two original products:
// drinks as a tea shop sells them, each size, sugar, ice and topping a
// choice with its price and, for a large cup, the extra work it makes.
var demoMenu = []struct {
	name   string
	cents  int64
	groups []domain.OptionGroup
}{
	{"Brown sugar boba milk", 620, []domain.OptionGroup{demoSize(80), demoSugar, demoIce, demoToppings}},
	{"Jasmine green tea", 450, []domain.OptionGroup{demoSize(60), demoSugar, demoIce, demoToppings}},
	{"Mango pomelo sago", 690, []domain.OptionGroup{demoSize(90), demoIce}},
}

// The demo's option groups. The tour orders the oolong milk tea without
// choosing anything, so its groups are all optional.
var (
	demoSugar = domain.OptionGroup{Name: "Sugar", MinSelect: 0, MaxSelect: 1, Options: []domain.Option{
		{Name: "Full sugar"}, {Name: "Less sugar"}, {Name: "Half sugar"}, {Name: "No sugar"},
	}}
	demoIce = domain.OptionGroup{Name: "Ice", MinSelect: 0, MaxSelect: 1, Options: []domain.Option{
		{Name: "Regular ice"}, {Name: "Less ice"}, {Name: "No ice"}, {Name: "Hot"},
	}}
	demoToppings = domain.OptionGroup{Name: "Toppings", MinSelect: 0, MaxSelect: 2, Options: []domain.Option{
		{Name: "Pearls", PriceDeltaCents: 60}, {Name: "Coconut jelly", PriceDeltaCents: 50}, {Name: "Pudding", PriceDeltaCents: 70},
	}}
)

// demoSize is a drink's required size; a large cup costs largeCents more
// and takes one more unit of a kitchen that counts items.
func demoSize(largeCents int64) domain.OptionGroup {
	return domain.OptionGroup{Name: "Size", MinSelect: 1, MaxSelect: 1, Options: []domain.Option{
		{Name: "Regular"}, {Name: "Large", PriceDeltaCents: largeCents, LoadUnits: 1},
	}}
}

// devCommand runs orderd for a developer: it finds or starts PostgreSQL,
// migrates, loads demo data, prints tokens and curl lines, and serves.
func devCommand(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	cfg := app.DefaultConfig()
	cfg.WebhookAllowLoopback = true
	fs := newFlagSet("dev")
	configFlags(fs, &cfg)
	reset := fs.Bool("reset", false, "remove every table of orderd and River in the dev database first, for a clean demo")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Logger = logger

	if cfg.DatabaseURL == "" {
		inst, err := pglocal.Find(ctx, pglocal.Options{
			DataDir: filepath.Join(devDir, "pg"),
			Logf:    func(format string, a ...any) { logger.Info(fmt.Sprintf(format, a...)) },
		})
		if err != nil {
			return err
		}
		defer func() {
			if err := inst.Stop(context.Background()); err != nil {
				logger.Warn("stop local PostgreSQL", "err", err)
			}
		}()
		if err := pglocal.EnsureDatabase(ctx, inst.URL, devDatabase); err != nil {
			return err
		}
		cfg.DatabaseURL = inst.DatabaseURL(devDatabase)
	}
	if *reset {
		logger.Info("reset: removing every table of orderd and River")
		if err := migrations.Reset(ctx, cfg.DatabaseURL); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	if cfg.JWTSecret == "" {
		secret, err := devSecret(filepath.Join(devDir, devSecretFile))
		if err != nil {
			return err
		}
		cfg.JWTSecret = secret
	}

	if cfg.CheckpointKey == "" {
		cfg.CheckpointKey = filepath.Join(devDir, devCheckpointKeyFile)
		if err := devCheckpointKey(cfg.CheckpointKey); err != nil {
			return err
		}
	}

	tuneGC(os.LookupEnv, serverGCPercent)
	a, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	if err := a.Listen(); err != nil {
		a.Close()
		return err
	}
	m, products, err := seedDemo(ctx, a.Store())
	if err != nil {
		a.Close()
		return fmt.Errorf("load demo data: %w", err)
	}
	if err := printWelcome(ctx, stdout, a, cfg, m, products); err != nil {
		a.Close()
		return err
	}
	return a.Run(ctx)
}

// devSecret reads the JWT secret dev keeps in path, or makes one and keeps
// it there: tokens printed yesterday still work today.
func devSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimSpace(string(b)); app.CheckJWTSecret(s) == nil {
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the JWT secret: %w", err)
	}
	secret, err := app.NewJWTSecret()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("keep the JWT secret: %w", err)
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the JWT secret: %w", err)
	}
	return secret, nil
}

// devCheckpointKeyFile is where dev keeps the seed that signs checkpoints.
const devCheckpointKeyFile = "checkpoint.key"

// devCheckpointKey makes the checkpoint key dev keeps in path unless one is
// there: checkpoints kept yesterday still verify with today's key.
func devCheckpointKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return fmt.Errorf("make a checkpoint key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("keep the checkpoint key: %w", err)
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(seed)+"\n"), 0o600); err != nil {
		return fmt.Errorf("keep the checkpoint key: %w", err)
	}
	return nil
}

func seedDemo(ctx context.Context, st *store.Store) (*store.MerchantView, []store.ProductView, error) {
	meta := store.Meta{Actor: domain.ActorSystem, Subject: "orderd-dev"}
	m, err := st.FindMerchantByName(ctx, demoMerchant)
	if errors.Is(err, domain.ErrNotFound) {
		// Capacity 1: the third order already waits in line, which is what
		// the tour and the pages are there to show. Walk-in customers may
		// order from the counter's QR code.
		m, err = st.CreateMerchant(ctx, domain.MerchantSettings{
			Name: demoMerchant, Capacity: 1, PrepSeconds: 90,
			MaxQueueWaitSeconds: domain.DefaultMaxQueueWaitSeconds, PaymentTimeoutSeconds: domain.DefaultPaymentTimeoutSeconds,
			GuestCheckout: true,
		}, meta)
		if err != nil {
			return nil, nil, err
		}
		stock, limit := 100, 1
		menu := []store.CreateProductParams{
			{MerchantID: m.ID, Name: demoTea, PriceCents: 580, Meta: meta, OptionGroups: []domain.OptionGroup{demoSugar, demoIce, demoToppings}},
			{MerchantID: m.ID, Name: demoLimitedItem, PriceCents: 650, Stock: &stock, PerUserLimit: &limit, Meta: meta},
		}
		for _, item := range demoMenu {
			menu = append(menu, store.CreateProductParams{MerchantID: m.ID, Name: item.name, PriceCents: item.cents, OptionGroups: item.groups, Meta: meta})
		}
		for _, p := range menu {
			if _, err := st.CreateProduct(ctx, p); err != nil {
				return nil, nil, err
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	products, err := st.ListProducts(ctx, m.ID)
	return m, products, err
}

// browseURL turns a listener's address into one a browser on this machine
// can open.
func browseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// printWelcome prints where everything is and the tour's variables, and
// keeps the variables in .orderd/env for `source`.
func printWelcome(ctx context.Context, w io.Writer, a *app.App, cfg app.Config, m *store.MerchantView, products []store.ProductView) error {
	base := browseURL(a.Addr())
	links, err := signInLinks(ctx, a.Store(), base, m.ID)
	if err != nil {
		return err
	}
	vars := [][2]string{{"ORDERD", base}, {"DATABASE_URL", cfg.DatabaseURL}}
	for _, who := range []struct {
		name string
		p    auth.Principal
	}{
		{"ADMIN", auth.Principal{Subject: "admin", Role: auth.RoleAdmin}},
		{"MERCHANT", auth.Principal{Subject: "demo-merchant", Role: auth.RoleMerchant, MerchantID: m.ID}},
		{"ALICE", auth.Principal{Subject: "alice", Role: auth.RoleCustomer}},
		{"BOB", auth.Principal{Subject: "bob", Role: auth.RoleCustomer}},
		{"CAROL", auth.Principal{Subject: "carol", Role: auth.RoleCustomer}},
	} {
		token, err := a.Auth().Issue(who.p, devTokenTTL)
		if err != nil {
			return err
		}
		vars = append(vars, [2]string{who.name, token})
	}
	vars = append(vars, [2]string{"MERCHANT_ID", m.ID.String()})
	for _, p := range products {
		switch p.Name {
		case demoTea:
			vars = append(vars, [2]string{"TEA", p.ID.String()})
		case demoLimitedItem:
			vars = append(vars, [2]string{"LIMITED", p.ID.String()})
		}
	}
	var env strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&env, "export %s='%s'\n", v[0], v[1])
	}
	envPath := filepath.Join(devDir, devEnvFile)
	if err := os.MkdirAll(devDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(envPath, []byte(env.String()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", envPath, err)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\norderd dev is up at %s\n\n", base)
	fmt.Fprintf(&b, "  customer page    %s/?merchant=%s\n", base, m.ID)
	fmt.Fprintf(&b, "  kitchen display  %s/kitchen\n", base)
	fmt.Fprintf(&b, "  order-here QR    %s/qr.png?merchant=%s (walk-in customers order as guests: docs/run-a-shop.md)\n", base, m.ID)
	fmt.Fprintf(&b, "  OpenAPI          %s/openapi.json\n", base)
	fmt.Fprintf(&b, "  metrics          %s/metrics\n", browseURL(a.OpsAddr()))
	fmt.Fprintf(&b, "  River UI         %s/riverui/\n", browseURL(a.OpsAddr()))
	fmt.Fprintf(&b, "  DATABASE_URL     %s\n", cfg.DatabaseURL)
	fmt.Fprintf(&b, "  JWT secret       kept in %s and reused by every start (tokens stay valid for %s)\n", filepath.Join(devDir, devSecretFile), devTokenTTL)
	fmt.Fprintf(&b, "\nSign in to the pages (each link works once, within %d minutes; a restart prints fresh ones):\n\n", int(devSignInTTL.Minutes()))
	for _, l := range links {
		fmt.Fprintf(&b, "  %-16s %s\n", l.who, l.url)
	}
	fmt.Fprintf(&b, "\nThe tour's variables (also in %s):\n\n%s", envPath, env.String())
	fmt.Fprintf(&b, "\n# the tour, in another terminal from this directory:\nsource %s && scripts/tour.sh\n", envPath)
	fmt.Fprintf(&b, "# clean demo data: orderd dev --reset\n")
	_, err = io.WriteString(w, b.String())
	return err
}

type signInLink struct{ who, url string }

// signInLinks mints a single-use sign-in code for each demo customer and
// for the demo merchant's kitchen. The code rides in the URL's fragment,
// which browsers never send to a server; the page exchanges it for a token.
func signInLinks(ctx context.Context, st *store.Store, base string, merchant uuid.UUID) ([]signInLink, error) {
	var links []signInLink
	for _, who := range []struct {
		label, page string
		holder      store.TicketHolder
	}{
		{"alice", "/?merchant=" + merchant.String(), store.TicketHolder{Subject: "alice", Role: string(auth.RoleCustomer)}},
		{"bob", "/?merchant=" + merchant.String(), store.TicketHolder{Subject: "bob", Role: string(auth.RoleCustomer)}},
		{"carol", "/?merchant=" + merchant.String(), store.TicketHolder{Subject: "carol", Role: string(auth.RoleCustomer)}},
		{"kitchen", "/kitchen", store.TicketHolder{Subject: "demo-kitchen", Role: string(auth.RoleMerchant), MerchantID: merchant}},
	} {
		code, hash := auth.NewSignInCode()
		if _, err := st.IssueSignInCode(ctx, &store.IssueSignInCodeParams{Hash: hash, Holder: who.holder,
			TTL: devSignInTTL, TokenTTL: devSignInTokenTTL}); err != nil {
			return nil, err
		}
		links = append(links, signInLink{who: who.label, url: base + who.page + "#code=" + code})
	}
	return links, nil
}
