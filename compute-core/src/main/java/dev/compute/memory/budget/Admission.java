package dev.compute.memory.budget;

import dev.compute.memory.internal.WithdrawnFirst;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;

/**
 * A request's wait for room in its budget ({@link BudgetLedger#claimLater}), completed once its bytes are counted as
 * under way. From the moment its budget lets it in, whichever comes first of its holder's ending and its caller's use
 * takes the bytes ({@link #takeBytes}): the holder to give them back before the functions added to its future run, the
 * caller to hand them on (to the pool's wait). Ended by its holder before it is let in, it leaves its budget's queue.
 */
public final class Admission extends WithdrawnFirst<Void> {

    private final Runnable leave;
    /** Who takes the bytes of a request let in. */
    public enum Taker {
        /** Its holder, ending it: the bytes go back. */
        HOLDER,
        /** Its caller, using them. */
        CALLER
    }

    private final AtomicReference<@Nullable Taker> bytesTakenBy = new AtomicReference<>();

    Admission(Runnable leave) {
        this.leave = leave;
    }

    /** Admitted at once, with nobody to leave. */
    static Admission now() {
        Admission admitted = new Admission(() -> { });
        admitted.tell();
        return admitted;
    }

    /** Refused at once. */
    static Admission failed(Throwable refusal) {
        Admission refused = new Admission(() -> { });
        refused.completeExceptionally(refusal);
        return refused;
    }

    @Override
    protected void withdraw() {
        leave.run();
    }

    /** Tells the request it is let in, unless its holder ended it first. Takes nothing. */
    void tell() {
        completeWithoutWithdrawing(null);
    }

    /** True for the first to ask only: it decides where the bytes of a request let in go. */
    public boolean takeBytes(Taker taker) {
        return bytesTakenBy.compareAndSet(null, taker);
    }

    /** Whether {@code taker} took the bytes. */
    public boolean bytesTakenBy(Taker taker) {
        return bytesTakenBy.get() == taker;
    }
}
