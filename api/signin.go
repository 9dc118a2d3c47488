package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// Sign-in codes: how long one may wait to be used, and how long the token it
// buys lasts, unless the request that mints it says otherwise.
const (
	defaultSignInCodeSeconds = 600
	maxSignInCodeSeconds     = 3600
	minSignInCodeSeconds     = 30
	defaultSignInTokenTTL    = 12 * 60 * 60
	maxSignInTokenTTL        = 7 * 24 * 60 * 60
	minSignInTokenTTL        = 60
)

type mintSignInCodeRequest struct {
	Sub              string     `json:"sub"`
	Role             auth.Role  `json:"role"`
	MerchantID       *uuid.UUID `json:"merchant_id"`
	Lane             *string    `json:"lane"`
	ExpiresInSeconds *int       `json:"expires_in_seconds"`
	TokenTTLSeconds  *int       `json:"token_ttl_seconds"`
}

type signInCodeResponse struct {
	Code       string       `json:"code"`
	ExpiresAt  time.Time    `json:"expires_at"`
	Sub        string       `json:"sub"`
	Role       auth.Role    `json:"role"`
	MerchantID *uuid.UUID   `json:"merchant_id"`
	Lane       *domain.Lane `json:"lane"`
}

// mintSignInCode is how a platform signs a person in to the pages: it mints
// a code with its admin token and hands the page a link carrying the code in
// its fragment; the page exchanges the code for a token. The code is worth
// little in a browser history: it works once, for minutes.
func (s *Server) mintSignInCode(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAdminister() {
		return errAdminOnly
	}
	var req mintSignInCodeRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	holder, err := s.signInHolder(r, req)
	if err != nil {
		return err
	}
	lane, err := signInLane(req)
	if err != nil {
		return err
	}
	codeTTL, err := secondsIn("expires_in_seconds", req.ExpiresInSeconds, defaultSignInCodeSeconds, minSignInCodeSeconds, maxSignInCodeSeconds)
	if err != nil {
		return err
	}
	tokenTTL, err := secondsIn("token_ttl_seconds", req.TokenTTLSeconds, defaultSignInTokenTTL, minSignInTokenTTL, maxSignInTokenTTL)
	if err != nil {
		return err
	}
	code, hash := auth.NewSignInCode()
	expires, err := s.store.IssueSignInCode(r.Context(), &store.IssueSignInCodeParams{Hash: hash, Holder: holder, Lane: string(lane),
		TTL: codeTTL, TokenTTL: tokenTTL})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, signInCodeResponse{Code: code, ExpiresAt: expires.UTC(), Sub: holder.Subject, Role: req.Role,
		MerchantID: req.MerchantID, Lane: laneOf(req.Role, lane)})
	return nil
}

// signInLane is the lane a code's token carries: customers only; "" when
// the request names none (a token without a lane queues normally).
func signInLane(req mintSignInCodeRequest) (domain.Lane, error) {
	if req.Lane == nil {
		return "", nil
	}
	lane := domain.Lane(*req.Lane)
	if !lane.Valid() {
		return "", domain.Errorf(domain.CodeValidation, `lane must be "normal" or "priority"`)
	}
	if req.Role != auth.RoleCustomer {
		return "", domain.Errorf(domain.CodeValidation, "lane goes with role customer only")
	}
	return lane, nil
}

// laneOf is the lane a customer's orders go to, and nothing for the other
// roles, whose orders have no lane.
func laneOf(role auth.Role, l domain.Lane) *domain.Lane {
	if role != auth.RoleCustomer {
		return nil
	}
	if l == "" {
		l = domain.LaneNormal
	}
	return &l
}

// signInHolder checks who a code is minted for: a known role, a subject,
// and for a merchant an existing merchant (and for nobody else one).
func (s *Server) signInHolder(r *http.Request, req mintSignInCodeRequest) (store.TicketHolder, error) {
	if req.Sub == "" || len(req.Sub) > domain.MaxIDLength {
		return store.TicketHolder{}, domain.Errorf(domain.CodeValidation, "sub must be 1-%d characters", domain.MaxIDLength)
	}
	h := store.TicketHolder{Subject: req.Sub, Role: string(req.Role)}
	switch req.Role {
	case auth.RoleCustomer, auth.RoleAdmin:
		if req.MerchantID != nil {
			return store.TicketHolder{}, domain.Errorf(domain.CodeValidation, "merchant_id goes with role merchant only")
		}
	case auth.RoleMerchant:
		if req.MerchantID == nil {
			return store.TicketHolder{}, domain.Errorf(domain.CodeValidation, "role merchant needs a merchant_id")
		}
		if _, err := s.store.GetMerchant(r.Context(), *req.MerchantID); err != nil {
			return store.TicketHolder{}, err
		}
		h.MerchantID = *req.MerchantID
	default:
		return store.TicketHolder{}, domain.Errorf(domain.CodeValidation, "role must be customer, merchant or admin")
	}
	return h, nil
}

func secondsIn(field string, v *int, def, lo, hi int) (time.Duration, error) {
	n := orDefault(v, def)
	if n < lo || n > hi {
		return 0, domain.Errorf(domain.CodeValidation, "%s must be %d-%d", field, lo, hi)
	}
	return time.Duration(n) * time.Second, nil
}

type signInRequest struct {
	Code string `json:"code"`
}

type signInResponse struct {
	Token      string       `json:"token"`
	TokenType  string       `json:"token_type"`
	ExpiresAt  time.Time    `json:"expires_at"`
	Sub        string       `json:"sub"`
	Role       auth.Role    `json:"role"`
	MerchantID *uuid.UUID   `json:"merchant_id"`
	Lane       *domain.Lane `json:"lane"`
}

// signIn exchanges a sign-in code for a bearer token, once. It takes no
// token, so it is limited per client address; a code is 32 random bytes, so
// the limit protects the database, not the codes.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) error {
	if ok, retry := s.signInLimit.Allow(clientKey(r.RemoteAddr)); !ok {
		return rateLimited(retry)
	}
	var req signInRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	hash, err := auth.ParseSignInCode(req.Code)
	if err != nil {
		return err
	}
	code, err := s.store.RedeemSignInCode(r.Context(), hash)
	if errors.Is(err, store.ErrTicketNotFound) {
		err = auth.ErrBadSignInCode
	}
	if err != nil {
		return err
	}
	p := auth.Principal{Subject: code.Holder.Subject, Role: auth.Role(code.Holder.Role), MerchantID: code.Holder.MerchantID,
		Lane: domain.Lane(code.Lane)}
	token, expires, err := s.auth.IssueExpiring(p, code.TokenTTL)
	if err != nil {
		return err
	}
	resp := signInResponse{Token: token, TokenType: "Bearer", ExpiresAt: expires.UTC(), Sub: p.Subject, Role: p.Role, Lane: laneOf(p.Role, p.Lane)}
	if p.MerchantID != uuid.Nil {
		resp.MerchantID = &p.MerchantID
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, resp)
	return nil
}
