package dev.compute.memory.budget;

import org.jspecify.annotations.Nullable;

/**
 * One buffer a budget counts, from its allocation until its memory goes back: where it is held and how many bytes,
 * linked into its budget's list of open buffers (unlinked in constant time as its memory goes back). Guarded by the
 * ledger's lock.
 */
final class BudgetEntry<B> {

    final BudgetAccount<B> account;
    final B buffer;
    final int location;
    final long bytes;
    /** A mapped file: counted apart, against no limit. */
    final boolean mapped;
    @Nullable BudgetEntry<B> previous;
    @Nullable BudgetEntry<B> next;

    BudgetEntry(BudgetAccount<B> account, B buffer, int location, long bytes, boolean mapped) {
        this.account = account;
        this.buffer = buffer;
        this.location = location;
        this.bytes = bytes;
        this.mapped = mapped;
    }
}
