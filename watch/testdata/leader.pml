/*
 * watch.Leader's lease term, write guard and fenced checkpoint save, with
 * the lease store's conditional updates (mongodb/checkpoint.go,
 * internal/memstore), for spin. Checked by watch TestLeaderModel
 * (`make spin`); docs/testing.md says what it covers and abstracts away.
 *
 * Time is discrete: one clock, the server's; local clocks run at its rate
 * and are only ever subtracted. Steps are urgent: the clock advances only
 * when no process can move (spin's timeout), and every delay is an
 * explicit choice: when the server handles a lease request and when its
 * reply (or the timeout) comes, when a job's next event comes, when a
 * derived write lands before its deadline (a stall after the guard
 * passed), when a checkpoint save reaches the server (possibly long
 * after its deadline, or never). Two instances run Leader.Run, campaigning
 * until the bound, for TERMS0 and TERMS1 terms; a term runs one engine (the job) doing up to WORK
 * units, each a guarded derived write and a guarded checkpoint save.
 * Instance 0's jobs finish (Leader.Do's); instance 1's run until their
 * context ends (Leader.Run's stream). Once per instance, a term's
 * renewal loop may stall for STALL (a paused goroutine or process).
 *
 * Every comment "go <file> <func>[ (else)| (defer)]: <code>" quotes the Go
 * statement the Promela statements right after it model (else: their
 * negation). TestLeaderModelInStep finds each in that function, in this
 * order, translates it and compares it with them, and wants every other
 * statement of those functions waived with a reason (modelWaivers).
 *
 * Planted bugs (each must make spin report an error):
 *   BUG_RENEW_AFTER_REPLY  renewal time taken after the reply
 *   BUG_NO_EPOCH_CHECK     the fenced save does not compare the epoch
 *   BUG_NO_GUARD           the engine writes without asking the guard
 *   BUG_NO_CANCEL          a refused renewal waits for the job without cancelling it
 *   BUG_SAME_EPOCH         a takeover keeps the expired lease's epoch
 *   BUG_RELEASE_ANY        Release does not match the owner's epoch
 */

#define TTL     6   /* the lease's duration */
#define EVERY   2   /* renewEvery(TTL) = TTL/3 */
#define MARGIN  2   /* defaultMargin(TTL) = TTL/3 */
#define RTT     2   /* a lease round trip's bound: the write timeout, under TTL/2 */
#ifndef MAXT
#define MAXT    8   /* the clock stops here: the bound (make spin: 10) */
#endif
#define N       2   /* instances */
#ifndef TERMS0
#define TERMS0  1   /* terms of instance 0 */
#endif
#ifndef TERMS1
#define TERMS1  2   /* terms of instance 1 */
#endif
#ifndef WORK
#define WORK    2   /* units of work per job */
#endif
#define GAP     2   /* the most time between two of a job's units */
#define LATE    8   /* a save delivered late arrives this long after it was sent */
#define STALL   TTL /* a term's goroutine paused (a stop-the-world pause, a frozen VM) */
#define EPOCHS  6   /* > TERMS0 + TERMS1: epochs are 1.. */
#define SLOTS   4   /* one per term: k = i*2 + t */

#define capped(t) ((t) > MAXT -> MAXT : (t))

byte now;           /* the server's clock */

/* The state document: {lease: {owner, epoch, expires}, checkpoint: {epoch}}. */
byte leaseOwner;    /* instance+1; 0: no lease document yet */
byte leaseEpoch;
byte leaseExpires;
byte cpEpoch;       /* the epoch of the last accepted checkpoint */

/* Ghosts: what the properties read, never the code. */
byte granted[EPOCHS];   /* the latest expiry the server set for an epoch */
byte writer[EPOCHS];    /* instance+1 whose write of an epoch landed first */
bool lostSeen[SLOTS];   /* the term learned its lease was taken */

/* What a term shares with its engine. */
byte renewedAt[SLOTS];  /* renewedAt: the send time of the last renewal */
bool cancelled[SLOTS];  /* engCtx is done */
bool engineDone[SLOTS]; /* the job returned (done) */
bool engineLost[SLOTS]; /* ... with ErrLeaseExpiring or ErrFenced */

/* A term's checkpoint save in flight and its result. */
byte savePending[SLOTS];  /* the epoch it carries; 0: none */
byte saveAt[SLOTS];       /* when the network delivers it */
bool saveDone[SLOTS];
bool saveAccepted[SLOTS];

#define expired (leaseOwner == 0 || leaseExpires <= now)

/* Acquire's findAndModify: the lease when none exists or it expired by
   the server's clock, with the next epoch, until now + TTL. */
inline serverAcquire(i) {
	/* go mongodb/checkpoint.go acquireWrite: filter = bson.D{{Key: "_id", Value: stateID}, {Key: "$or", Value: bson.A{bson.D{{Key: fieldLease, Value: bson.D{{Key: "$exists", Value: false}}}}, bson.D{{Key: "$expr", Value: bson.D{{Key: "$lte", Value: bson.A{"$" + fieldLease + ".expires", serverNow}}}}}}}} */
	/* go internal/memstore/source.go Acquire: case s.lease == nil: */
	/* go internal/memstore/source.go Acquire: case !now.Before(s.lease.Expires): */
	if
	:: expired ->
#ifndef BUG_SAME_EPOCH
		/* go mongodb/checkpoint.go acquireWrite: epoch := bson.D{{Key: "$add", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$" + fieldLease + ".epoch", int64(0)}}}, int64(1)}}} */
		/* go internal/memstore/source.go Acquire: s.lease = &resume.Lease{Owner: owner, Epoch: s.lease.Epoch + 1, Expires: now.Add(ttl)} */
		leaseEpoch++;
#else
		if
		:: leaseOwner == 0 -> leaseEpoch++
		:: else
		fi;
#endif
		leaseOwner = i + 1;
		leaseExpires = now + TTL;
		granted[leaseEpoch] = leaseExpires;
		ok = true;
		e = leaseEpoch
	/* go internal/memstore/source.go Acquire: default: */
	:: else -> ok = false
	fi
}

/* Renew: only while owner holds it at epoch; expires = now + TTL. */
inline serverRenew(i) {
	/* go mongodb/checkpoint.go renewWrite: filter = bson.D{{Key: "_id", Value: stateID}, {Key: fieldLease + ".owner", Value: owner}, {Key: fieldLease + ".epoch", Value: epoch}} */
	/* go internal/memstore/source.go Renew (else): if s.lease.Owner != owner || s.lease.Epoch != epoch { */
	if
	:: leaseOwner == i + 1 && leaseEpoch == e ->
		/* go internal/memstore/source.go Renew: s.lease.Expires = s.clock().Add(ttl) */
		leaseExpires = now + TTL;
		granted[e] = leaseExpires;
		ok = true
	:: else -> ok = false
	fi
}

/* Release: expires the lease if owner still holds it at epoch. */
inline serverRelease(i) {
#ifndef BUG_RELEASE_ANY
	/* go mongodb/checkpoint.go releaseWrite: return bson.D{{Key: "_id", Value: stateID}, {Key: fieldLease + ".owner", Value: owner}, {Key: fieldLease + ".epoch", Value: epoch}}, bson.D{{Key: "$set", Value: bson.D{{Key: fieldLease + ".expires", Value: time.Time{}}}}} */
	/* go internal/memstore/source.go Release: if s.lease != nil && s.lease.Owner == owner && s.lease.Epoch == epoch { */
	if
	:: leaseOwner == i + 1 && leaseEpoch == e ->
		/* go internal/memstore/source.go Release: s.lease.Expires = time.Time{} */
		leaseExpires = 0
	:: else
	fi
#else
	leaseExpires = 0
#endif
}

/* The checkpoint save of term k, fenced: only while the lease epoch is
   the save's. */
inline serverSave(k) {
	/* go mongodb/checkpoint.go saveCheckpointWrite: return bson.D{{Key: "_id", Value: stateID}, {Key: fieldLease + ".epoch", Value: cp.Epoch}}, update, false */
	/* go internal/memstore/source.go SaveCheckpoint (else): if cp.Epoch != cur { */
	if
#ifndef BUG_NO_EPOCH_CHECK
	:: leaseEpoch == savePending[k] ->
#else
	:: true ->
#endif
		/* Fencing: no checkpoint of an epoch older than the newest
		   acquired, nor than the last accepted, is accepted. */
		assert(savePending[k] == leaseEpoch);
		assert(savePending[k] >= cpEpoch);
		cpEpoch = savePending[k];
		saveAccepted[k] = true
	:: else -> saveAccepted[k] = false
	fi;
	saveDone[k] = true;
	savePending[k] = 0;
	saveAt[k] = 0
}

/* A derived write of epoch e lands: the server does not fence it, so time
   alone must keep it inside its epoch. */
inline landWrite(i, e) {
	/* Fencing: no later epoch exists yet. */
	assert(leaseEpoch == e);
	/* The guard's documented margin: it lands Margin/2 or more before
	   the server's expiry of its epoch. */
	assert(now + MARGIN / 2 <= granted[e]);
	/* At most one writer per epoch. */
	if
	:: writer[e] == 0 -> writer[e] = i + 1
	:: else -> assert(writer[e] == i + 1)
	fi
}

active proctype Clock() {
end:
	do
	:: atomic { timeout && now < MAXT -> now++ }
	od
}

/* The network delivers each in-flight checkpoint save at its time. */
active proctype Network() {
end:
	do
	:: atomic { savePending[0] != 0 && now >= saveAt[0] -> serverSave(0) }
	:: atomic { savePending[1] != 0 && now >= saveAt[1] -> serverSave(1) }
	:: atomic { savePending[2] != 0 && now >= saveAt[2] -> serverSave(2) }
	:: atomic { savePending[3] != 0 && now >= saveAt[3] -> serverSave(3) }
	od
}

/* The guard term gives its engine (eng.WriteGuard): refuse once TTL -
   Margin passed since the last renewal was sent; else the deadline TTL -
   Margin/2 after it. */
inline guard(k) {
#ifndef BUG_NO_GUARD
	/* go watch/leader.go term.WriteGuard: if l.Now().Sub(renewed) >= l.TTL-l.Margin { */
	if
	:: now - renewedAt[k] >= TTL - MARGIN ->
		/* go watch/leader.go term.WriteGuard: return time.Time{}, ErrLeaseExpiring */
		refused = true
	:: else ->
		/* go watch/leader.go term.WriteGuard: return renewed.Add(l.TTL - l.Margin/2), nil */
		deadline = renewedAt[k] + TTL - MARGIN / 2
	fi
#else
	deadline = 255
#endif
}

/* The job of term k (instance i, epoch e): up to WORK units of a guarded
   derived write and a guarded, fenced checkpoint save. ErrLeaseExpiring
   (the guard) or ErrFenced ends it lost (ActStandBy); a deadline passed
   is transient: the next unit retries. */
proctype Engine(byte i; byte k; byte e) {
	byte w, deadline, at;
	bool refused;
end_idle:
	do
	:: atomic { cancelled[k] -> break }
	:: atomic { w == WORK && i == 0 -> break }
	:: atomic { w < WORK && !cancelled[k] ->
		w++;
		/* The unit's event comes at once or GAP later. */
		if
		:: at = now
		:: at = capped(now + GAP)
		fi
	   }
		atomic { now >= at || cancelled[k] -> at = 0 };
		if
		:: atomic { cancelled[k] -> skip }
		:: atomic { !cancelled[k] ->
			/* go watch/guarded.go applyGuarded: wctx, cancel, err := guardCtx(ctx, guard) */
			guard(k);
			if
			:: refused -> engineLost[k] = true; break
			:: else
			fi;
			/* In flight: it lands at once, a moment later, or at the
			   last instant before its deadline, or the deadline cuts it
			   off. */
			if
			:: at = now
			:: at = capped(now + 1)
			:: at = capped(deadline - 1)
			:: at = capped(deadline)
			fi
		   }
			atomic {
				now >= at || cancelled[k] ->
				if
				:: !cancelled[k] && now < deadline ->
					assert(!lostSeen[k]);
					/* go watch/guarded.go applyGuarded: at, err := st.Apply(wctx, part) */
					landWrite(i, e)
				:: else
				fi;
				at = 0;
				/* go watch/engine.go saveCheckpoint: wctx, cancel, err := guardCtx(ctx, e.WriteGuard) */
				guard(k);
				if
				:: refused -> engineLost[k] = true; break
				:: else
				fi;
				if
				:: cancelled[k]
				:: else ->
					saveDone[k] = false;
					/* Delivered at once, at the end of the round trip, late,
					   or never. */
					if
					/* go watch/engine.go saveCheckpoint: if err := e.Checkpoints.SaveCheckpoint(wctx, cp); err != nil { */
					:: savePending[k] = e; saveAt[k] = now
					:: savePending[k] = e; saveAt[k] = capped(now + RTT)
					:: savePending[k] = e; saveAt[k] = capped(now + LATE)
					:: skip
					fi
				fi
			}
			/* The reply, before the deadline; past it the save may still land. */
			atomic {
				saveDone[k] || now >= capped(deadline) || cancelled[k] ->
				if
				:: saveDone[k] && !saveAccepted[k] && now < deadline && !cancelled[k] ->
					engineLost[k] = true; break /* ErrFenced */
				:: else
				fi;
				deadline = 0
			}
		fi
	od;
	atomic { engineDone[k] = true; w = 0; deadline = 0; at = 0; refused = false }
}

/* A lease round trip bounded by the write timeout (sent: its send time).
   request sets when the server handles it (at) and whether it does
   (handled); reply when the caller learns the result. An Acquire is
   handled and answered at once, or handled at once and its reply lost,
   or never handled; a Renew is handled and answered at once, or handled
   at once and answered at the end of the round trip, or handled and
   answered at the end of the round trip, or never handled.
   A lost reply and a lost request end at the timeout, an error. (The
   server handling a request later only sets a later expiry.) */
#define request(sent, acquire) \
	if \
	:: handled = true; at = sent; lag = 0 \
	:: acquire -> handled = true; at = sent; lag = 255 \
	:: !acquire -> handled = true; at = sent; lag = RTT \
	:: !acquire -> handled = true; at = capped(sent + RTT); lag = 0 \
	:: handled = false; at = capped(sent + RTT) \
	fi
#define reply(sent) \
	if \
	:: lag == 255 -> handled = false; at = capped(sent + RTT) \
	:: else -> at = capped(at + lag) \
	fi; \
	lag = 0

proctype Instance(byte i) {
	byte t, k, sent, e, start, renewed, next, at, lag;
	bool ok, handled, lost, stalled;
	do
	:: atomic { now < MAXT && (i == 0 && t < TERMS0 || i == 1 && t < TERMS1) ->
		k = i * 2 + t;
		/* go watch/leader.go Run: sent := l.Now() */
		sent = now;
		request(sent, true)
	   }
		atomic {
			now >= at ->
			if
			:: handled ->
				/* go watch/leader.go Run: lease, ok, err := l.Leases.Acquire(ctx, l.id, l.TTL) */
				serverAcquire(i); reply(sent)
			:: else
			fi
		}
		if
		:: atomic { now >= at && handled && ok ->
			t++;
			/* go watch/leader.go term: renewedAt.Store(&acquired) */
			renewedAt[k] = sent;
			/* go watch/leader.go term: go func() { done <- job(engCtx, eng) }() */
			run Engine(i, k, e);
			/* go watch/leader.go term: renewed := acquired */
			renewed = sent;
			/* go watch/leader.go term: tick := time.NewTicker(every) */
			next = now + EVERY;
			sent = 0; at = 0; handled = false; ok = false; lost = false
		   }
end_term:
			do
			/* go watch/leader.go term: case err := <-done: */
			:: atomic { engineDone[k] -> lost = engineLost[k]; break }
			/* Once per instance, the term's tick comes STALL late. */
			:: atomic { now >= next && !stalled && !engineDone[k] -> stalled = true; next = now + STALL }
			/* go watch/leader.go term: case <-tick.C: */
			:: atomic { now >= next && !engineDone[k] ->
				/* A late tick: the channel held one (a ticker drops the rest). */
				next = next + EVERY;
				if
				:: next < now -> next = now
				:: else
				fi;
				/* go watch/leader.go term: start := l.Now() */
				start = now;
				request(start, false)
			   }
				atomic {
					now >= at ->
					if
					:: handled ->
						/* go watch/leader.go term: cur, ok, err := l.Leases.Renew(ctx, l.id, lease.Epoch, l.TTL) */
						serverRenew(i); reply(start)
					:: else
					fi
				}
				atomic {
					now >= at ->
					if
					/* go watch/leader.go term: case err == nil && ok: */
					:: handled && ok ->
#ifdef BUG_RENEW_AFTER_REPLY
						start = now;
#endif
						/* go watch/leader.go term: renewed = start */
						renewed = start;
						/* go watch/leader.go term: renewedAt.Store(&start) */
						renewedAt[k] = start
					/* go watch/leader.go term: case err == nil: */
					:: handled && !ok ->
						lostSeen[k] = true;
#ifndef BUG_NO_CANCEL
						/* go watch/leader.go term: cancel() */
						cancelled[k] = true;
#endif
						lost = true
					/* go watch/leader.go term: default: */
					:: else /* an error: retried at the next renewal */
					fi;
					start = 0; at = 0; handled = false; ok = false;
					if
					:: lost /* the term returned above */
					:: else ->
						if
						/* go watch/leader.go term: if l.Now().Sub(renewed) >= l.TTL-l.Margin { */
						:: now - renewed >= TTL - MARGIN ->
							/* go watch/leader.go term: cancel() */
							cancelled[k] = true;
							lost = true
						:: else
						fi
					fi
				}
				if
				:: lost ->
					/* go watch/leader.go term: <-done */
					engineDone[k];
					break
				:: else
				fi
			od;
			/* Every way out of the term: the deferred cancel(), then the
			   deferred Release, which may fail. */
			atomic { cancelled[k] = true; renewed = 0; next = 0 };
			/* go watch/leader.go term (defer): if rerr := l.Leases.Release(rctx, l.id, lease.Epoch); rerr != nil { */
			if
			:: atomic { serverRelease(i) }
			:: skip
			fi;
			if
			:: atomic { lost -> lost = false; e = 0 } /* Run: continue */
			/* go watch/leader.go Run: if !lost { */
			:: atomic { !lost -> e = 0; break } /* the job finished: Run returns */
			fi
		:: atomic { now >= at && !(handled && ok) ->
			/* go watch/leader.go Run: sleepCtx(ctx, every) */
			start = capped(now + EVERY);
			sent = 0; at = 0; handled = false; ok = false; e = 0
		   }
end_sleep:
			atomic { now >= start -> start = 0 }
		fi
	:: atomic { now == MAXT || i == 0 && t == TERMS0 || i == 1 && t == TERMS1 -> break }
	od
}

init {
	atomic {
		run Instance(0);
		run Instance(1)
	}
}
