package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/pglocal"
	"github.com/orderd/orderd/store"
)

const (
	devDatabase     = "orderd_dev"
	demoMerchant    = "Autumn Milk Tea (demo)"
	demoTea         = "Osmanthus oolong milk tea"
	demoLimitedItem = "First cup of autumn (limited)"
)

// devCommand runs orderd for a developer: it finds or starts PostgreSQL,
// migrates, loads demo data, prints tokens and curl lines, and serves.
func devCommand(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	cfg := app.DefaultConfig()
	cfg.WebhookAllowLoopback = true
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	configFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Logger = logger

	if cfg.DatabaseURL == "" {
		inst, err := pglocal.Find(ctx, pglocal.Options{
			DataDir: ".orderd/pg",
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
	if cfg.JWTSecret == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("make a JWT secret: %w", err)
		}
		cfg.JWTSecret = hex.EncodeToString(b)
	}

	a, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	if err := a.Listen(); err != nil {
		return err
	}
	m, products, err := seedDemo(ctx, a.Store())
	if err != nil {
		return fmt.Errorf("load demo data: %w", err)
	}
	if err := printWelcome(stdout, a, cfg, m, products); err != nil {
		return err
	}
	return a.Run(ctx)
}

func seedDemo(ctx context.Context, st *store.Store) (*store.Merchant, []store.Product, error) {
	meta := store.Meta{Actor: domain.ActorSystem, Subject: "orderd-dev"}
	m, err := st.FindMerchantByName(ctx, demoMerchant)
	if errors.Is(err, domain.ErrNotFound) {
		m, err = st.CreateMerchant(ctx, domain.MerchantSettings{
			Name: demoMerchant, Capacity: 3, PrepSeconds: 60,
			MaxQueueWaitSeconds: domain.DefaultMaxQueueWaitSeconds, PaymentTimeoutSeconds: domain.DefaultPaymentTimeoutSeconds,
		}, meta)
		if err != nil {
			return nil, nil, err
		}
		stock, limit := 100, 1
		for _, p := range []store.CreateProductParams{
			{MerchantID: m.ID, Name: demoTea, PriceCents: 1800, Meta: meta},
			{MerchantID: m.ID, Name: demoLimitedItem, PriceCents: 2500, Stock: &stock, PerUserLimit: &limit, Meta: meta},
		} {
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

func printWelcome(w io.Writer, a *app.App, cfg app.Config, m *store.Merchant, products []store.Product) error {
	issue := func(p auth.Principal) (string, error) { return a.Auth().Issue(p, 7*24*time.Hour) }
	admin, err := issue(auth.Principal{Subject: "admin", Role: auth.RoleAdmin})
	if err != nil {
		return err
	}
	merchant, err := issue(auth.Principal{Subject: "demo-merchant", Role: auth.RoleMerchant, MerchantID: m.ID})
	if err != nil {
		return err
	}
	alice, err := issue(auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	if err != nil {
		return err
	}
	bob, err := issue(auth.Principal{Subject: "bob", Role: auth.RoleCustomer})
	if err != nil {
		return err
	}
	base := "http://" + strings.Replace(a.Addr(), "[::]", "localhost", 1)
	var b strings.Builder
	fmt.Fprintf(&b, "\norderd dev is up at %s (open it in a browser for the live page)\n\n", base)
	fmt.Fprintf(&b, "export ORDERD=%s\n", base)
	fmt.Fprintf(&b, "export ORDERD_JWT_SECRET=%s\n", cfg.JWTSecret)
	fmt.Fprintf(&b, "export ADMIN=%s\n", admin)
	fmt.Fprintf(&b, "export MERCHANT=%s\n", merchant)
	fmt.Fprintf(&b, "export ALICE=%s\n", alice)
	fmt.Fprintf(&b, "export BOB=%s\n", bob)
	fmt.Fprintf(&b, "export MERCHANT_ID=%s\n", m.ID)
	for _, p := range products {
		if p.Name == demoTea {
			fmt.Fprintf(&b, "export TEA=%s\n", p.ID)
		} else {
			fmt.Fprintf(&b, "export LIMITED=%s\n", p.ID)
		}
	}
	fmt.Fprintf(&b, `
# place and pay an order as alice:
curl -s -X POST $ORDERD/v1/orders -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: $(uuidgen || date +%%s%%N)" -d "{\"merchant_id\":\"$MERCHANT_ID\",\"items\":[{\"product_id\":\"$TEA\",\"quantity\":1}],\"payment_ref\":\"pay-1\"}"
# the merchant's load and queue:
curl -s $ORDERD/v1/merchants/$MERCHANT_ID -H "Authorization: Bearer $MERCHANT"
curl -s "$ORDERD/v1/merchants/$MERCHANT_ID/orders?status=queued" -H "Authorization: Bearer $MERCHANT"
`)
	_, err = io.WriteString(w, b.String())
	return err
}
