package dev.compute.memory.budget;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import org.jspecify.annotations.Nullable;

/**
 * One buffer a budget counts, from the moment the budget lets it in until its memory goes back: which budget, where,
 * how many bytes, and the thread stripe whose books hold it ({@link BudgetStripes}). The buffer carries it (the
 * manager hands it back as the buffer's memory returns), so that giving a buffer's bytes back looks nothing up. Linked
 * into its budget's list of open buffers on its stripe, under that stripe's hold.
 *
 * @param <B> the buffer handle, for closing what is still open when the budget closes
 */
public final class BudgetNode<B> {

    private static final VarHandle BUFFER;

    static {
        try {
            BUFFER = MethodHandles.lookup().findVarHandle(BudgetNode.class, "buffer", Object.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final BudgetAccount<B> account;
    final int stripe;
    /** Where and how many bytes; set under the stripe's hold as a spare node is taken again (see {@link BudgetCells#spare}). */
    int location;
    long bytes;
    /** Counted and linked, until its memory goes back (or its request fails, or the manager forgets every count); under the stripe's hold. */
    boolean open;
    /** The thread whose request let it in from the room, while that request may be under way; under the stripe's hold. */
    @Nullable Thread requester;
    /**
     * Whether its buffer went to the caller, the budget still open: a close counts it as a leftover then, and else
     * leaves it to the request, which sees the close; under the stripe's hold.
     */
    boolean handedOut;
    @Nullable BudgetNode<B> previous;
    @Nullable BudgetNode<B> next;
    /** The buffer, once the pool gave it; null while the request is under way. Written once, with release semantics. */
    @SuppressWarnings("unused") // through BUFFER
    private @Nullable Object buffer;

    BudgetNode(BudgetAccount<B> account, int location, long bytes, int stripe) {
        this.account = account;
        this.location = location;
        this.bytes = bytes;
        this.stripe = stripe;
    }

    /** The path of the budget it was allocated through. */
    public String budget() {
        return account.path;
    }

    public long bytes() {
        return bytes;
    }

    /** The buffer, or null while the request is under way in the pool. */
    @SuppressWarnings("unchecked") // only ever set to a B
    public @Nullable B buffer() {
        return (B) BUFFER.getAcquire(this);
    }

    void buffer(@Nullable B value) {
        BUFFER.setRelease(this, value);
    }

    @Override
    public String toString() {
        return "BudgetNode[" + account.path + ", " + bytes + " bytes]";
    }
}
