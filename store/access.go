package store

import (
	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

// Access says who is asking. Orders the caller may not see answer not_found,
// so their existence is not revealed.
type Access struct {
	Actor      domain.Actor
	Subject    string
	MerchantID uuid.UUID // for ActorMerchant
}

func (a Access) party() domain.Party {
	p := domain.Party{Actor: a.Actor, Subject: a.Subject}
	if a.MerchantID != uuid.Nil {
		p.MerchantID = a.MerchantID.String()
	}
	return p
}

func (a Access) canSee(customerID string, merchantID uuid.UUID) bool {
	return a.party().MaySeeOrder(customerID, merchantID.String())
}

func (a Access) meta(requestID string) Meta {
	return Meta{Actor: a.Actor, Subject: a.Subject, RequestID: requestID}
}

var errOrderNotFound = domain.Errorf(domain.CodeNotFound, "order not found")

var errNotYourOrders = domain.Errorf(domain.CodeForbidden, "only the order's merchant or an admin may do this")
