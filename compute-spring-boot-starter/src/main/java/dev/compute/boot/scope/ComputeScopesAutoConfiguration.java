package dev.compute.boot.scope;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.ComputeProperties;
import dev.compute.memory.ViewScope;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.core.env.Environment;

/**
 * View scopes for web requests ({@code compute.scopes.requests}) and for the tasks of Spring's executors and schedulers
 * ({@code compute.scopes.tasks}), both on by default. Without them a view taken on a request thread lives until its
 * buffer closes, and a buffer closed on another thread keeps its memory until that thread calls in again. And, where
 * switched on, a budget of their own for web requests ({@code compute.scopes.request-budgets}) and tasks
 * ({@code compute.scopes.task-budgets}) under the configured budgets ({@link ComputeBudgets}).
 */
@AutoConfiguration(after = ComputeMemoryAutoConfiguration.class)
@ConditionalOnClass(ViewScope.class)
@ConditionalOnBooleanProperty(name = ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, matchIfMissing = true)
public final class ComputeScopesAutoConfiguration {

    /** The filter's bean; it runs first among the application's filters, so every filter after it is inside the scope. */
    public static final String REQUEST_SCOPE_FILTER = "computeRequestScopeFilter";

    /**
     * The request budgets' filter's bean. It runs inside the view scope's, so the request's budget closes first: what the
     * request forgot is closed there, and the memory of what its views still held goes back as they end, right after; and
     * after Spring Security's ({@code spring.security.filter.order}, -100 by default), so that a
     * {@link RequestBudgetResolver} can take the tenant from the authenticated principal.
     */
    public static final String REQUEST_BUDGET_FILTER = "computeRequestBudgetFilter";

    // Spring Security's filter order and its default, as Spring Boot's SecurityFilterProperties has them; Security is optional here
    private static final String SECURITY_FILTER_ORDER = "spring.security.filter.order";
    private static final int DEFAULT_SECURITY_FILTER_ORDER = -100;

    /** Right after Security's filter: never past the last order (an overflow would run it first), nor before the view scope's. */
    static int requestBudgetOrder(int securityFilterOrder) {
        return securityFilterOrder == Ordered.LOWEST_PRECEDENCE ? securityFilterOrder
                : Math.max(securityFilterOrder + 1, Ordered.HIGHEST_PRECEDENCE + 1);
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
    @ConditionalOnClass(Filter.class)
    @ConditionalOnBooleanProperty(name = "compute.scopes.requests", matchIfMissing = true)
    static final class RequestScopes {

        @Bean(REQUEST_SCOPE_FILTER)
        FilterRegistrationBean<RequestScopeFilter> computeRequestScopeFilter() {
            FilterRegistrationBean<RequestScopeFilter> registration = new FilterRegistrationBean<>(new RequestScopeFilter());
            registration.setName(REQUEST_SCOPE_FILTER);
            registration.setOrder(Ordered.HIGHEST_PRECEDENCE);
            registration.setDispatcherTypes(DispatcherType.REQUEST, DispatcherType.ASYNC, DispatcherType.ERROR);
            registration.setAsyncSupported(true);
            return registration;
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBooleanProperty(name = "compute.scopes.tasks", matchIfMissing = true)
    static final class TaskScopes {

        @Bean
        TaskScopeDecorator computeTaskScopeDecorator() {
            return new TaskScopeDecorator();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
    @ConditionalOnClass(Filter.class)
    @ConditionalOnBean(ComputeBudgets.class)
    @ConditionalOnBooleanProperty(name = "compute.scopes.request-budgets")
    static final class RequestBudgets {

        @Bean
        @ConditionalOnMissingBean
        RequestBudgetResolver computeRequestBudgetResolver(ComputeBudgets budgets, ComputeProperties properties) {
            return new HeaderRequestBudgetResolver(budgets, properties.scopes().budgetHeader());
        }

        @Bean(REQUEST_BUDGET_FILTER)
        FilterRegistrationBean<RequestBudgetFilter> computeRequestBudgetFilter(RequestBudgetResolver resolver, ComputeBudgets budgets,
                Environment environment) {
            FilterRegistrationBean<RequestBudgetFilter> registration = new FilterRegistrationBean<>(
                    new RequestBudgetFilter(resolver, new ScopedBudgets(budgets)));
            registration.setName(REQUEST_BUDGET_FILTER);
            registration.setOrder(requestBudgetOrder(environment.getProperty(SECURITY_FILTER_ORDER, Integer.class, DEFAULT_SECURITY_FILTER_ORDER)));
            registration.setDispatcherTypes(DispatcherType.REQUEST, DispatcherType.ASYNC);
            registration.setAsyncSupported(true);
            return registration;
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBean(ComputeBudgets.class)
    @ConditionalOnBooleanProperty(name = "compute.scopes.task-budgets")
    static final class TaskBudgets {

        @Bean
        TaskBudgetDecorator computeTaskBudgetDecorator(ComputeBudgets budgets) {
            return new TaskBudgetDecorator(new ScopedBudgets(budgets));
        }
    }
}
