package dev.compute.memory.budget;

import org.jspecify.annotations.Nullable;

/**
 * One file a budget mapped, from its mapping until it is unmapped: counted apart, against no limit, and linked into
 * its budget's list of mapped files (unlinked in constant time as it is unmapped). The buffer carries it, as a pooled
 * buffer carries its {@link BudgetNode}. Guarded by the ledger's lock.
 */
public final class BudgetEntry<B> {

    final BudgetAccount<B> account;
    final B buffer;
    final long bytes;
    /** Linked, until the file is unmapped or the manager forgets every count. */
    boolean open = true;
    /** Its caller has the buffer: only then does a close report it as still held (see {@link BudgetLedger#handOutMapped}). */
    boolean handedOut;
    @Nullable BudgetEntry<B> previous;
    @Nullable BudgetEntry<B> next;

    BudgetEntry(BudgetAccount<B> account, B buffer, long bytes) {
        this.account = account;
        this.buffer = buffer;
        this.bytes = bytes;
    }
}
