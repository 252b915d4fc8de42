/**
 * The stretches of work that views end with: each web request and each task of Spring's executors and schedulers
 * runs in a {@link dev.compute.memory.ViewScope}, so a buffer closed on one thread gets its memory back when the
 * requests and tasks that viewed it on others end, however long their threads then wait idle.
 */
@NullMarked
package dev.compute.boot.scope;

import org.jspecify.annotations.NullMarked;
