"""Seeded generator of the built-in demo grievance data set.

Thousands of varied bank complaints for five desks, in English and romanised Hindi-English, with a
marked slice of "twins": groups with exactly the same bag of words but different desks.
"""

import io
import os
import random
import re
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from numbers import Integral, Real
from pathlib import Path

import openpyxl
import pandas as pd
from openpyxl.writer.excel import ExcelWriter

from core.text import bag_key, word_spans, words

DESKS: tuple[str, ...] = ("UPI Dispute", "Card Fraud", "Loan Query", "KYC Update", "Other")
COLUMNS: tuple[str, ...] = (
    "complaint_id",
    "channel",
    "language",
    "text",
    "desk",
    "slice",
    "twin_group",
)
CHANNELS: tuple[str, ...] = ("email", "app", "chat", "branch")

# Roughly balanced, Other a little smaller: a real complaints inbox is never perfectly even.
_DESK_WEIGHTS: tuple[float, ...] = (0.22, 0.21, 0.20, 0.20, 0.17)
# A fixed moment for the XLSX metadata and zip entries, so the same seed gives the same bytes.
_FIXED_TIME = datetime(2024, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class DemoConfig:
    """What to generate: how many rows, from which seed, and the twin and code-mixed shares."""

    rows: int = 3000
    seed: int = 7
    twin_share: float = 0.12  # share of rows in twin groups (same bag of words, other desk)
    codemix_share: float = 0.2  # share of rows in romanised Hindi-English ("hi-en")


# ---------------------------------------------------------------------------------------------
# Slot fillers: names, banks, apps, merchants, cities, amounts, masked numbers, dates.
# ---------------------------------------------------------------------------------------------

FIRST_NAMES = (
    "Rahul", "Priya", "Amit", "Sneha", "Vikram", "Anjali", "Suresh", "Kavita", "Arjun", "Deepa",
    "Mohammed", "Fatima", "Rohan", "Pooja", "Karthik", "Lakshmi", "Sandeep", "Neha", "Imran",
    "Meera", "Gurpreet", "Harpreet", "Ravi", "Sunita", "Aditya", "Divya", "Manoj", "Shalini",
    "Joseph", "Anita", "Venkatesh", "Farhan", "Nisha", "Abhishek", "Swati", "Rajesh", "Ayesha",
    "Pradeep", "Rekha", "Siddharth", "Tanvi", "Naveen", "Bhavna", "Kiran", "Salma", "Ritesh",
)  # fmt: skip
LAST_NAMES = (
    "Sharma", "Verma", "Patel", "Iyer", "Reddy", "Nair", "Singh", "Gupta", "Khan", "Das",
    "Mukherjee", "Kulkarni", "Joshi", "Menon", "Chatterjee", "Yadav", "Pillai", "Banerjee",
    "Shaikh", "Agarwal", "Rao", "Bose", "Mehta", "D'Souza", "Fernandes", "Gill", "Naidu",
    "Mishra", "Pandey", "Chauhan", "Hegde", "Kapoor",
)  # fmt: skip
BANKS = (
    "SBI", "State Bank of India", "HDFC Bank", "ICICI Bank", "ICICI", "Axis Bank", "Axis",
    "Kotak Mahindra Bank", "Kotak", "PNB", "Punjab National Bank", "Bank of Baroda",
    "Canara Bank", "Union Bank", "IDFC First Bank", "Yes Bank", "IndusInd Bank",
)  # fmt: skip
APPS = ("PhonePe", "Google Pay", "GPay", "Paytm", "BHIM", "Amazon Pay", "CRED", "BHIM UPI")
UPI_HANDLES = ("okaxis", "ybl", "paytm", "okhdfcbank", "oksbi", "okicici", "ibl", "axl", "upi")
MERCHANTS = (
    "Swiggy", "Zomato", "Amazon", "Flipkart", "Myntra", "BigBasket", "Reliance Digital", "Croma",
    "IRCTC", "MakeMyTrip", "BookMyShow", "Uber", "Ola", "DMart", "Nykaa", "Tata CLiQ", "Jio",
    "Airtel", "Apollo Pharmacy", "Blinkit", "Zepto", "a local kirana store", "an electronics shop",
    "a petrol pump", "a medical store",
)  # fmt: skip
CITIES = (
    "Mumbai", "Delhi", "Bengaluru", "Chennai", "Kolkata", "Hyderabad", "Pune", "Ahmedabad",
    "Jaipur", "Lucknow", "Kochi", "Indore", "Bhopal", "Patna", "Chandigarh", "Nagpur", "Surat",
    "Coimbatore", "Guwahati", "Bhubaneswar", "Visakhapatnam", "Noida", "Gurugram", "Thane",
    "Mysuru", "Vadodara", "Ludhiana", "Ranchi", "Dehradun", "Madurai",
)  # fmt: skip
LOAN_TYPES = (
    "home loan", "personal loan", "car loan", "two-wheeler loan", "education loan", "gold loan",
    "business loan", "consumer durable loan", "loan against property",
)  # fmt: skip
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


def _indian_grouping(value: int) -> str:
    """Digits grouped the Indian way: 1234567 -> "12,34,567"."""
    digits = str(value)
    if len(digits) <= 3:
        return digits
    head, groups = digits[:-3], [digits[-3:]]
    while len(head) > 2:
        groups.insert(0, head[-2:])
        head = head[:-2]
    return ",".join([head, *groups])


_RUPEE_FORMATS = ("₹{g}", "Rs. {v}", "INR {g}.{p:02d}", "Rs {g}/-", "₹ {v}", "Rs.{g}", "{g} rupees")


def _rupees(value: int, rng: random.Random) -> str:
    """One amount in one of the ways Indian customers write rupees."""
    if value >= 100_000 and rng.random() < 0.6:
        lakh = f"{value / 100_000:.2f}".rstrip("0").rstrip(".")
        return rng.choice((f"{lakh} lakh", f"Rs {lakh} lakh", f"₹{lakh} lakh"))
    template = rng.choice(_RUPEE_FORMATS)
    return template.format(g=_indian_grouping(value), v=value, p=rng.randrange(100))


def _amount_value(rng: random.Random, low: int, high: int) -> int:
    """A log-uniform amount, often rounded the way prices and transfers are."""
    value = int(low * (high / low) ** rng.random())
    step = rng.choice((1, 1, 10, 50, 100, 500))
    rounded = max(low, value // step * step)
    return rounded - 1 if step >= 100 and rng.random() < 0.3 else rounded


def _date(rng: random.Random) -> str:
    """A 2024-2025 date in one of the formats seen in complaints."""
    year, month, day = rng.choice((2024, 2025)), rng.randint(1, 12), rng.randint(1, 28)
    suffix = "th" if 10 <= day <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    name = MONTHS[month - 1]
    formats = (
        f"{day:02d}/{month:02d}/{year}",
        f"{day:02d}-{month:02d}-{year}",
        f"{day} {name} {year}",
        f"{name} {day}",
        f"{day}{suffix} {name[:3]}",
        f"{year}-{month:02d}-{day:02d}",
        f"{day:02d}.{month:02d}.{str(year)[2:]}",
        f"{day}{suffix} {name}",
    )
    return rng.choice(formats)


def _masked_card(rng: random.Random, last4: str) -> str:
    formats = (
        f"XXXX XXXX XXXX {last4}",
        f"**** {last4}",
        f"xxxx-xxxx-xxxx-{last4}",
        f"**** **** **** {last4}",
        f"ending {last4}",
        f"XXXX{last4}",
    )
    return rng.choice(formats)


def _upi_ref(rng: random.Random, utr: str) -> str:
    formats = (
        f"UTR {utr}",
        f"UPI Ref No. {utr}",
        f"RRN {utr}",
        f"UPI transaction ID {utr}",
        f"ref no {utr}",
        f"UTR: {utr}",
    )
    return rng.choice(formats)


def _digits(rng: random.Random, count: int) -> str:
    return f"{rng.randrange(10**count):0{count}d}"


def _upi_id(rng: random.Random, first: str) -> str:
    stem = rng.choice((first.lower(), f"{first.lower()}.{rng.choice(LAST_NAMES).lower()}"))
    stem = stem.replace("'", "")
    tail = rng.choice(("", _digits(rng, 2), _digits(rng, 4), "98" + _digits(rng, 8)))
    return f"{stem}{tail}@{rng.choice(UPI_HANDLES)}"


def _other(rng: random.Random, choices: Sequence[str], taken: str) -> str:
    """A choice different from `taken` (a second bank, a second city)."""
    return rng.choice([c for c in choices if c != taken])


def _time(rng: random.Random) -> str:
    hour, minute = rng.randint(0, 23), rng.randint(0, 59)
    if rng.random() < 0.5:
        return f"{hour:02d}:{minute:02d}"
    return f"{(hour - 1) % 12 + 1}:{minute:02d} {rng.choice(('am', 'pm', 'AM', 'PM'))}"


def _rate(rng: random.Random, low: float) -> str:
    return f"{low + rng.randint(0, 60) * 0.05:.2f}".rstrip("0").rstrip(".") + "%"


_SlotMaker = Callable[[random.Random, "_Slots"], str]

_SLOT_MAKERS: dict[str, _SlotMaker] = {
    "first": lambda rng, s: rng.choice(FIRST_NAMES),
    "last": lambda rng, s: rng.choice(LAST_NAMES),
    "name": lambda rng, s: f"{s['first']} {s['last']}",
    "bank": lambda rng, s: rng.choice(BANKS),
    "bank2": lambda rng, s: _other(rng, BANKS, s["bank"]),
    "app": lambda rng, s: rng.choice(APPS),
    "merchant": lambda rng, s: rng.choice(MERCHANTS),
    "city": lambda rng, s: rng.choice(CITIES),
    "city2": lambda rng, s: _other(rng, CITIES, s["city"]),
    "amount": lambda rng, s: _rupees(_amount_value(rng, 49, 90_000), rng),
    "amount2": lambda rng, s: _rupees(_amount_value(rng, 49, 20_000), rng),
    "small_amount": lambda rng, s: _rupees(_amount_value(rng, 59, 1_200), rng),
    "big_amount": lambda rng, s: _rupees(_amount_value(rng, 50_000, 6_000_000), rng),
    "emi": lambda rng, s: _rupees(_amount_value(rng, 1_500, 95_000), rng),
    "emi2": lambda rng, s: _rupees(_amount_value(rng, 1_500, 95_000), rng),
    "rate": lambda rng, s: _rate(rng, 7.2),
    "rate2": lambda rng, s: _rate(rng, 10.3),
    "last4": lambda rng, s: _digits(rng, 4),
    "card": lambda rng, s: _masked_card(rng, s["last4"]),
    "acct": lambda rng, s: "X" * rng.choice((4, 6, 8)) + _digits(rng, 4),
    "loan_acct": lambda rng, s: rng.choice(("HL", "PL", "LN", "CL")) + "XXXXXX" + _digits(rng, 4),
    "utr": lambda rng, s: rng.choice("3456") + _digits(rng, 11),
    "upi_ref": lambda rng, s: _upi_ref(rng, s["utr"]),
    "upi_id": lambda rng, s: _upi_id(rng, s["first"]),
    "payee": lambda rng, s: _upi_id(rng, rng.choice(FIRST_NAMES)),
    "date": lambda rng, s: _date(rng),
    "date2": lambda rng, s: _date(rng),
    "time": lambda rng, s: _time(rng),
    "ticket": lambda rng, s: rng.choice(("SR", "CMP-", "CRM", "REF")) + _digits(rng, 8),
    "phone": lambda rng, s: rng.choice("6789") + _digits(rng, 1) + "XXXXXX" + _digits(rng, 2),
    "days": lambda rng, s: str(rng.randint(3, 45)),
    "months": lambda rng, s: str(rng.randint(2, 14)),
    "years": lambda rng, s: str(rng.randint(2, 25)),
    "loan_type": lambda rng, s: rng.choice(LOAN_TYPES),
    "pan": lambda rng, s: "XXXXX" + _digits(rng, 4) + rng.choice("ABCDEFGHJKLMNPRSTZ"),
    "aadhaar": lambda rng, s: "XXXX XXXX " + _digits(rng, 4),
    "cust_id": lambda rng, s: "CIF" + _digits(rng, 9),
    "cheque": lambda rng, s: _digits(rng, 6),
}


class _Slots(dict):
    """Slot values for one complaint, drawn on first use so every repeat of a slot agrees."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def __missing__(self, key: str) -> str:
        value = _SLOT_MAKERS[key](self.rng, self)
        self[key] = value
        return value


def _fill(template: str, slots: _Slots) -> str:
    return template.format_map(slots)


# ---------------------------------------------------------------------------------------------
# English phrasebook.
# ---------------------------------------------------------------------------------------------

EN_CORES: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "I made a UPI payment of {amount} to {payee} on {date} using {app}. The money was debited "
        "from my {bank} account but the receiver has not got it. {upi_ref}.",
        "My UPI transaction failed on {date} but {amount} was deducted from my account {acct}. "
        "It has been {days} days and the amount is not reversed.",
        "I sent {amount} to the wrong UPI ID ({payee}) by mistake on {date}. Please help me get "
        "the money back.",
        "The UPI payment of {amount} to {merchant} is showing pending in {app} since {date}. The "
        "merchant says they did not receive anything.",
        "My UPI refund of {amount} from {merchant} has not been credited even though the "
        "merchant says it was processed on {date}. {upi_ref}.",
        "{amount} was debited twice for a single UPI payment to {merchant} on {date}. Please "
        "reverse the duplicate debit.",
        "I scanned a QR code at {merchant} in {city} and paid {amount} through {app}; the "
        "shopkeeper's phone did not show the payment but my account was debited.",
        "An autopay mandate that I never set up debited {amount} from my account through UPI on "
        "{date}. I want it cancelled and refunded.",
        "I accepted a collect request on {app} thinking I would receive money, but {amount} went "
        "out of my account instead. The request came from {payee}.",
        "My UPI PIN is correct but every payment fails with 'transaction declined by bank' since "
        "{date}, and one payment of {amount} still got debited.",
        "Money transferred to {payee} via UPI on {date} at {time} is not reflecting in the "
        "beneficiary's {bank2} account. {upi_ref}.",
        "I paid my electricity bill of {amount} using {app} and the bill still shows unpaid, but "
        "the money is gone from my {bank} account.",
        "UPI transaction with {upi_ref} dated {date} for {amount} is marked successful in my app "
        "but the beneficiary has not been credited.",
        "The {app} app shows the transaction as failed but my bank statement shows a debit of "
        "{amount} on {date}. Kindly refund.",
        "I tried paying {amount} to {merchant} through UPI three times and each time it failed, "
        "but two debits have appeared in my account {acct}.",
        "My UPI Lite balance of {amount2} disappeared after the {app} update on {date}.",
        "I raised a dispute in {app} for the failed UPI transfer of {amount} on {date} but it "
        "was closed without any refund.",
        "A stranger sent a UPI collect request and my father approved it; {amount} was lost from "
        "his {bank} account on {date}.",
        "UPI transfer of {amount} to my own account in {bank2} has not arrived although my "
        "{bank} account was debited on {date}.",
        "The reversal for my failed UPI payment was promised within 48 hours but it is now "
        "{days} days. {upi_ref}, amount {amount}.",
        "I paid {amount} to {payee} on {date}. The receiver's bank says it never arrived and my "
        "bank says it was successful. Please check with NPCI.",
        "While booking tickets on {merchant}, the UPI payment of {amount} was debited but the "
        "booking failed and no refund has come.",
        "My UPI ID {upi_id} got linked to the wrong bank account and a payment of {amount} was "
        "debited from my {bank2} account instead.",
        "Money I sent through {app} to my landlord ({payee}) on {date} went to some other account.",
        "The app said UPI limit exceeded on {date}, but the transaction of {amount} still got "
        "debited.",
        "A shopkeeper in {city} refused to hand over the goods saying the UPI payment of {amount} "
        "did not come, while my account {acct} shows the debit.",
        "The UPI mandate for my {merchant} subscription keeps debiting {amount2} every month "
        "even after I cancelled it on {date}.",
        "I transferred {amount} via UPI on {date}; the status is 'deemed approved' but the "
        "beneficiary has not been credited.",
        "Duplicate debit of {amount} on {date} for a UPI payment via {app}. Only one payment "
        "reached {payee}.",
        "I paid {amount} over UPI to {payee} for an online order that never arrived and the "
        "seller is not responding. Please raise a UPI dispute.",
        # Hard cases: another desk's words, UPI desk.
        "I paid my {loan_type} EMI of {emi} through {app} on {date}; the UPI debit happened but "
        "the loan account shows it unpaid. {upi_ref}.",
        "My KYC is complete, still {app} says the account is not verified, and the UPI payment "
        "of {amount} failed after the debit.",
        "I paid my credit card bill of {amount} by UPI on {date}; the money left my {bank} "
        "account but the card still shows the bill as unpaid. {upi_ref}.",
        "Money was debited but not received by the other side. Payment of {amount} on {date}, "
        "reference {utr}.",
    ),
    "Card Fraud": (
        "There is an unauthorised transaction of {amount} on my credit card {card} at "
        "{merchant} on {date}. I did not make this purchase.",
        "My debit card ending {last4} was used for {amount} online at {merchant} while the card "
        "was with me in {city}.",
        "I got a call from someone claiming to be from {bank} asking for my card CVV and OTP. "
        "After the call, {amount} was debited from my card {card}.",
        "Three international transactions totalling {amount} appeared on my card {card} on "
        "{date}. I have never travelled abroad and never shared my card details.",
        "I lost my wallet on {date} in {city} and before I could block the card, someone spent "
        "{amount} using contactless payments.",
        "Please block my card {card} immediately. I received an SMS for a transaction of "
        "{amount} that I did not do.",
        "I think my card was skimmed at a petrol pump in {city}. Since {date} there are small "
        "debits of {amount2} that I never authorised.",
        "My credit card was charged {amount} by {merchant} twice for one order on {date}. The "
        "merchant is not responding, please raise a chargeback.",
        "I disputed the fraudulent transaction of {amount} on card {card} on {date}, ticket "
        "{ticket}, but the bank has not given the temporary credit.",
        "Somebody added my card to an e-wallet and made purchases of {amount}. I never received "
        "any OTP for this.",
        "My card was blocked after a fraud alert on {date}, but the replacement card has not "
        "been delivered and I am stuck without a card.",
        "The {bank} fraud team blocked my card {card}, but the transaction of {amount} at "
        "{merchant} that triggered it is still in my statement.",
        "An ATM withdrawal of {amount} was made with my debit card in {city} on {date} at "
        "{time}, while I was in {city2}.",
        "A subscription I never signed up for is charging {amount2} every month to my credit "
        "card {card}.",
        "I clicked a link in a fake {bank} message about card reward points and immediately lost "
        "{amount} from my card.",
        "My virtual card from {bank} was used for {amount} on a gaming site on {date}. I have "
        "never used that card.",
        "Someone cloned my card. The physical card is with me but there is a swipe of {amount} "
        "at a jewellery shop in {city}.",
        "I got an OTP for a transaction of {amount} at {merchant} that I did not start, and the "
        "amount was debited before I could report it.",
        "My card {card} shows a cash advance of {amount} on {date} that I did not take. Please "
        "reverse it along with the charges.",
        "A fraudulent EMI conversion of {amount} was done on my credit card without my consent.",
        "{merchant} charged my card {amount} for a cancelled order and the refund never came "
        "back to the card.",
        "A caller offered me a credit limit increase; he knew my card number {card} and then "
        "{amount} was spent at {merchant}.",
        "A tap-to-pay transaction of {amount} happened on my card in a crowded metro in {city} "
        "on {date} without me paying anything.",
        "My card was declined at {merchant} with 'card blocked for suspicious activity', and "
        "then I saw {amount} spent that I do not recognise.",
        "The chargeback for the unauthorised transaction of {amount} on {date} was rejected "
        "saying I authenticated it, but I never got an OTP.",
        "Please hotlist my credit card {card}; it was stolen on {date} and I can see attempts "
        "at {merchant}.",
        "I see foreign currency charges of {amount} from an unknown website on my debit card "
        "statement for {date}.",
        "My credit card was used to buy gift cards worth {amount} on {date}. I did not buy any "
        "gift cards.",
        "A fake customer care number I found online asked me to share my screen; later {amount} "
        "was spent on my card {card}.",
        "Unknown merchant {merchant} has charged {amount} on my card on {date}. I want the "
        "charge reversed and a new card.",
        # Hard cases.
        "Someone called saying my KYC has expired and asked for the OTP; after that {amount} "
        "was spent on my card {card}.",
        "I got a message that my loan was approved and had to pay a processing fee; I paid "
        "{amount} by credit card and it turned out to be a fraud.",
        "Money was debited from my account without my knowledge on {date}, {amount}, at "
        "{merchant}. I did not do this.",
        "A payment of {amount} I never made shows on my statement for {date}; the SMS said it "
        "was at {merchant}.",
    ),
    "Loan Query": (
        "My {loan_type} EMI of {emi} was debited twice this month from my account {acct}. "
        "Please refund the extra EMI.",
        "The interest rate on my {loan_type} was increased from {rate} to {rate2} without any "
        "intimation.",
        "I closed my {loan_type} on {date} but I have still not received the NOC from {bank}.",
        "I made a part prepayment of {big_amount} on {date} but my EMI and tenure have not been "
        "revised.",
        "My CIBIL report shows my {loan_type} as overdue even though I paid every EMI on time. "
        "Please correct it.",
        "The disbursement of {big_amount} sanctioned on {date} has not been credited yet. The "
        "builder is asking for payment.",
        "Bounce charges of {small_amount} were levied on my loan account although my EMI was "
        "paid on time.",
        "I want to foreclose my {loan_type}. Please share the foreclosure statement and the "
        "charges applicable.",
        "Insurance of {amount} was added to my {loan_type} without my consent. Please remove it "
        "and refund the premium.",
        "Recovery agents from {bank} are calling me and my family at odd hours about an EMI that "
        "was already paid on {date}.",
        "My loan account {loan_acct} shows an outstanding of {big_amount} but by my calculation "
        "it should be much lower.",
        "The processing fee on my {loan_type} was {amount}, but I was told it would be waived at "
        "the time of sanction.",
        "I have not received my loan statement and interest certificate for tax filing. Loan "
        "account {loan_acct}.",
        "My EMI date was changed from the 5th to the 10th without my request and now I am being "
        "charged late fees.",
        "The interest subsidy on my son's education loan has not been credited for the last "
        "{months} months.",
        "My gold loan was closed on {date}, but the {city} branch has not returned the gold "
        "ornaments.",
        "I applied for a top-up on my home loan on {date} and there is no update for {days} days.",
        "The EMI on my {loan_type} went up to {emi} though the tenure was supposed to change, "
        "not the EMI.",
        "After the moratorium, interest on interest has been charged on my {loan_type}. Please "
        "explain the calculation.",
        "The original property documents for my closed home loan have not been returned even "
        "after {months} months.",
        "My personal loan was pre-closed but the auto debit of {emi} still continues every month.",
        "I paid the overdue EMI of {emi} in cash at the branch on {date} but the loan account "
        "still shows it unpaid.",
        "My loan application was rejected without any reason after I submitted all documents on "
        "{date}.",
        "The sanctioned amount of {big_amount} was reduced at disbursement without explanation.",
        "I need a revised repayment schedule for my {loan_type}; the one in the app shows "
        "{months} extra EMIs.",
        "A loan I never took, for {big_amount}, is showing in my credit report under {bank}. "
        "Please investigate.",
        "The floating rate on my home loan was not reduced even after the repo rate cut; I am "
        "still paying {rate2}.",
        "The hypothecation on my car's RC has not been removed even though the car loan was "
        "closed on {date}.",
        "Part payment of {big_amount} made on {date} was adjusted towards interest instead of "
        "principal.",
        "The {bank} app shows my EMI as {emi} but {emi2} is being deducted every month.",
        # Hard cases.
        "The EMI on the consumer durable loan I took on my credit card is being charged twice; "
        "{emi} on {date} and again on {date2}.",
        "My EMI is paid through a UPI autopay mandate, but the mandate failed and a bounce "
        "charge of {small_amount} was levied on the loan.",
        "Amount of {emi} was debited from my account on {date} and I do not know what it is "
        "for. I only have a {loan_type} with you.",
        "My KYC documents were collected at sanction; now the loan desk is asking again before "
        "releasing the second tranche of {big_amount}.",
    ),
    "KYC Update": (
        "My account {acct} has been frozen for pending KYC though I submitted my Aadhaar and "
        "PAN at the {city} branch on {date}.",
        "I completed video KYC on {date} but the status still shows 'KYC pending' in the {bank} "
        "app.",
        "Please update my address; I have moved to {city} and uploaded the new address proof on "
        "{date}.",
        "My PAN is not linked with my account and TDS is being deducted at a higher rate. I have "
        "submitted PAN {pan} twice.",
        "Re-KYC reminders keep coming even though I updated my KYC at the branch on {date}.",
        "My name is spelt differently in my Aadhaar and the bank records, so my KYC is getting "
        "rejected. Please correct it to {name}.",
        "I uploaded my documents for the KYC update {days} days ago but nobody has verified them.",
        "The branch is asking me to come in person for KYC though I am a senior citizen and "
        "cannot travel. Is there a doorstep option?",
        "My Aadhaar {aadhaar} is not getting seeded with my account; the app shows an error "
        "every time.",
        "The CKYC number is not being generated for my account and my mutual fund KYC is stuck "
        "because of that.",
        "My KYC was rejected saying the photo is not clear. I uploaded a fresh photograph on "
        "{date}.",
        "Credits to my account are blocked due to incomplete KYC; my salary of {amount} could "
        "not be credited.",
        "I want to update the mobile number linked to my account to {phone}; the old number is "
        "no longer with me.",
        "My date of birth is wrong in the bank records; please update it as per my PAN card.",
        "My minor account has to be converted to a regular account now that I am 18; which KYC "
        "documents are needed?",
        "The video KYC call got disconnected three times on {date} and now the app says I have "
        "used up my attempts.",
        "I am an NRI and need to update my overseas address and passport details for KYC.",
        "The bank marked my account as 'KYC non-compliant' even though the documents were "
        "verified last year.",
        "My e-KYC with Aadhaar OTP fails because the OTP goes to an old mobile number.",
        "The signature on my KYC form does not match the records and my cheque was returned; I "
        "want to update my signature.",
        "Please update my surname after marriage. My new name is {name}.",
        "My account was partially frozen on {date} for KYC and I cannot withdraw even {amount2} "
        "for medical expenses.",
        "I submitted Form 60 since I do not have a PAN yet, but the account is still restricted.",
        "Staff at the {city} branch refused to accept my voter ID as address proof for the KYC "
        "update.",
        "The KYC of my joint account holder is pending and the whole account is blocked because "
        "of it.",
        "The KYC update I did online on {date} has shown 'under review' for {days} days now.",
        "I got a notice to re-submit KYC within {days} days or account {acct} will be frozen; I "
        "already submitted everything on {date}.",
        "The Aadhaar biometric verification failed at the branch and they are not accepting any "
        "other document.",
        "My father passed away and I need the KYC of our joint account updated to my name only.",
        "Please update my email ID and PAN on the account; my Form 16 shows a mismatch.",
        # Hard cases.
        "My debit card stopped working because the account was frozen for KYC; please update my "
        "KYC, I submitted my PAN on {date}.",
        "UPI payments are failing because my account is on KYC hold; I have already uploaded "
        "my Aadhaar {aadhaar}.",
        "My loan disbursement is on hold because my KYC is not updated; please verify my "
        "Aadhaar {aadhaar}.",
        "I cannot do any transaction from account {acct} since {date}; the branch says some "
        "documents are pending.",
    ),
    "Other": (
        "I am unable to log in to net banking since {date}; it says my user ID is locked.",
        "I requested a cheque book on {date} but it has not been delivered to my {city} address.",
        "The staff at the {city} branch were rude and made me wait two hours for a simple "
        "passbook update.",
        "The ATM at {city} did not dispense cash but my account was debited {amount2} on {date}.",
        "Minimum balance charges of {small_amount} were deducted from my savings account though "
        "I maintained the balance.",
        "My FD of {big_amount} that matured on {date} has not been credited to my savings account.",
        "There is a very long queue at the ATM near {city} station every day because only one "
        "machine works.",
        "I am charged {small_amount} for SMS alerts that I never receive.",
        "My locker at the {city} branch could not be opened on {date} because the staff said the "
        "key register was missing.",
        "The interest on my savings account for the last quarter is lower than what was promised.",
        "I want to add a nominee to my account but the branch says the form is not available.",
        "The net banking OTP is not coming to my registered number, so I cannot make any online "
        "transfers.",
        "My account statement for {months} months has not been emailed even after several "
        "requests.",
        "The {city} branch was closed during working hours on {date} without any notice.",
        "I deposited a cheque of {amount} on {date} and it has not cleared after {days} days.",
        "The customer care number keeps me on hold for 40 minutes and then disconnects.",
        "My request to close my savings account, submitted on {date}, has not been processed.",
        "The passbook printing machine at the {city} branch has been out of order for weeks.",
        "{bank} debited {small_amount} as the annual fee for my debit card, which was "
        "supposed to be free for life.",
        "The cash deposit machine took {amount2} on {date} but did not credit my account.",
        "The demand draft of {amount} I requested on {date} has still not been issued.",
        "Net banking shows my balance wrongly since the system upgrade.",
        "My pension of {amount2} has not been credited this month.",
        "The {bank} mobile app crashes on login after the latest update.",
        "The branch manager refused to issue a balance certificate I need for my visa.",
        "The ATM swallowed my debit card at {city} on {date} and the branch is not returning it.",
        "The bank charged GST on a service I never asked for; the debit of {small_amount} on "
        "{date} is unexplained.",
        "Cash withdrawal at the branch counter took three hours because the server was down.",
        "I was asked to buy an insurance policy before my FD could be opened at the {city} branch.",
        "My stop payment request for cheque number {cheque} was not processed and the cheque "
        "got cleared.",
        # Hard cases.
        "Net banking and UPI both are not working since this morning; is the server down?",
        "I want to know the status of my complaint {ticket}; nobody has called me back since "
        "{date}.",
        "An amount of {small_amount} was debited on {date} with the narration 'charges'. What "
        "is this for?",
        "My new debit card PIN is not generating at the ATM and the branch says the card "
        "department will call; nobody called.",
    ),
}

EN_TERSE: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "upi failed money gone",
        "UPI payment failed but amount debited",
        "sent {amount} to wrong upi id, help",
        "upi txn pending since {date}",
        "refund not recieved for upi payment",
        "double debit on upi pls check",
        "{app} payment stuck, money cut",
        "UPI {utr} failed. refund?",
        "paid {payee}, not received by them",
        "upi autopay debited without permission",
    ),
    "Card Fraud": (
        "card fraud!! block my card",
        "unknown txn on my credit card",
        "someone used my card for {amount}",
        "didnt do this card transaction {card}",
        "block card {card} urgently",
        "card charged twice please reverse",
        "otp not shared, still card debited",
        "my card got cloned i think",
        "fraud txn {amount} at {merchant}",
        "stolen card being used, help",
    ),
    "Loan Query": (
        "emi deducted twice",
        "need NOC for closed loan",
        "why interest rate increased??",
        "loan statement needed urgently",
        "wrong emi bounce charge",
        "foreclosure amount for {loan_type} please",
        "loan disbursement delayed since {date}",
        "EMI {emi} debited twice",
        "{loan_type} closed, NOC pending",
        "prepayment not reflecting in loan",
    ),
    "KYC Update": (
        "kyc update pending since {date}",
        "account frozen, kyc already done",
        "please update my address",
        "pan not linked error",
        "video kyc keeps failing",
        "kyc rejected, why?",
        "re-kyc done still reminders",
        "aadhaar seeding failed again",
        "update mobile number {phone}",
        "KYC documents submitted, status?",
    ),
    "Other": (
        "net banking locked",
        "cheque book not received",
        "atm no cash but amount debited",
        "branch staff very rude",
        "app not opening since update",
        "passbook not updated",
        "FD not credited after maturity",
        "customer care not picking up",
        "locker not opening, staff clueless",
        "minimum balance charge wrong",
    ),
}

EN_DETAILS: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "The transaction reference is {upi_ref}.",
        "My UPI ID is {upi_id}.",
        "The receiver's UPI ID is {payee}.",
        "I have attached the screenshot from {app}.",
        "{app} support told me to contact my bank.",
        "The merchant has confirmed in writing that the amount was not received.",
        "That money was my rent for this month.",
        "My bank statement shows the debit on {date}.",
        "I have already waited the five working days mentioned in the app.",
        "The payment was made from my {bank} account {acct}.",
        "UTR number for your reference: {utr}.",
        "The {app} transaction ID is {utr} and it was paid to {payee}.",
        "I am attaching the bank SMS with {upi_ref}.",
    ),
    "Card Fraud": (
        "My card number is {card}.",
        "I have already blocked the card through the app.",
        "I never shared my OTP or PIN with anyone.",
        "The card was with me the whole time.",
        "Please issue a new card to my registered address.",
        "I have filed a complaint with the cyber cell in {city}.",
        "The SMS alert came at {time}.",
        "I want the {amount} credited back to my card.",
        "I have also reported it on the national cyber crime portal.",
        "My card limit is now almost used up because of this.",
        "The RRN in the SMS is {utr}.",
    ),
    "Loan Query": (
        "My loan account number is {loan_acct}.",
        "I have paid all EMIs on time for {months} months.",
        "The EMI is auto-debited from my account {acct}.",
        "Please share the updated amortisation schedule.",
        "This is affecting my credit score.",
        "I have the payment receipt dated {date}.",
        "The relationship manager is not answering my calls.",
        "The loan was sanctioned at the {city} branch.",
        "I need this sorted before I apply for another loan.",
    ),
    "KYC Update": (
        "I have uploaded my Aadhaar and PAN again.",
        "My customer ID is {cust_id}.",
        "The documents were submitted at the {city} branch.",
        "I got an SMS saying my KYC is under process.",
        "I cannot do any transactions until this is fixed.",
        "Please do not freeze my account; my salary comes into it.",
        "The PAN on file should end with {pan}.",
        "My Aadhaar number is {aadhaar}.",
    ),
    "Other": (
        "The branch staff told me to write to the head office.",
        "I have visited the branch three times.",
        "My customer ID is {cust_id}.",
        "Nobody has responded to my earlier email.",
        "This is very disappointing from a bank like {bank}.",
        "The branch is in {city}, near the main market.",
        "My account number is {acct}.",
    ),
}

EN_GENERIC_DETAILS = (
    "I complained earlier as well, ticket {ticket}, but nothing happened.",
    "I called customer care on {date2} and was told it would be resolved in 7 days.",
    "My registered mobile number is {phone}.",
    "This is the third time I am writing about this.",
    "Please call me back on {phone}.",
    "I have attached all the documents you asked for.",
    "Nobody at the branch could tell me what is going on.",
    "It has been more than a week and I still have no answer.",
    "I am losing patience with the way this has been handled.",
    "The chatbot only gives standard replies and closes the chat.",
)

EN_OPENERS = (
    "Dear Sir/Madam,",
    "Hi team,",
    "Hello,",
    "To the Branch Manager,",
    "Respected Sir,",
    "Dear {bank} Customer Care,",
    "Good morning,",
    "Sir,",
    "Hi,",
    "Dear Team,",
    "With reference to my account {acct},",
    "Subject: complaint regarding my account.",
)

EN_CLOSERS = (
    "Please resolve at the earliest.",
    "Regards, {name}",
    "Thanks and regards, {name}.",
    "Kindly look into this urgently.",
    "Awaiting your response.",
    "Please do the needful.",
    "Thank you.",
    "I hope this will be resolved soon.",
    "If this is not resolved I will escalate to the Banking Ombudsman.",
    "Please treat this as urgent.",
    "Yours faithfully, {name}",
    "{name}, {city}",
)

EN_CONTEXTS = (
    "I have been a {bank} customer for {years} years.",
    "I am a salaried employee in {city}.",
    "I am a senior citizen and not very comfortable with apps.",
    "My home branch is in {city}.",
    "I mostly use the mobile app for banking.",
    "I am writing on behalf of my mother.",
    "I run a small shop in {city}.",
    "I am a student and this is my only account.",
    "I was travelling to {city2} for work that week.",
    "I have a savings account and a salary account with {bank}.",
)

# Mentions of another desk's words that do not change the desk: real complaints wander.
EN_DISTRACTORS = (
    "My loan EMI from the same account is fine.",
    "My KYC was updated last year, so that is not the issue.",
    "I also have a credit card with you, which works fine.",
    "I use {app} for UPI regularly without problems.",
    "I visited the branch but they asked me to email.",
    "Net banking works normally.",
    "My card is with me and I have not lost it.",
    "There is no problem with my loan account.",
)

# ---------------------------------------------------------------------------------------------
# Romanised Hindi-English phrasebook.
# ---------------------------------------------------------------------------------------------

HI_CORES: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "Mera UPI payment fail ho gaya par paisa kat gaya. {amount} ka transaction tha, {date} ko.",
        "{app} se {amount} bheje the {payee} ko, lekin unko paisa nahi mila aur mere account se "
        "kat gaya hai.",
        "Galti se galat UPI ID pe {amount} transfer ho gaye, please paisa wapas dilwa dijiye.",
        "UPI transaction {date} se pending dikha raha hai, {upi_ref}. Paisa account se debit ho "
        "chuka hai.",
        "Merchant bol raha hai payment nahi aaya, par mera {amount} {app} se kat gaya.",
        "Ek hi payment ke liye do baar {amount} kat gaya UPI se, ek wapas karo please.",
        "Refund ka {amount} abhi tak account mein nahi aaya, {merchant} ne bola refund ho gaya "
        "hai.",
        "QR code scan karke {amount} pay kiya tha {city} mein, dukaandar ke paas nahi pahuncha.",
        "Maine koi autopay mandate nahi lagaya tha, phir bhi har mahine {amount2} UPI se kat "
        "raha hai.",
        "Galti se collect request approve kar diya, {amount} chala gaya. Ye fraud hai, UPI "
        "dispute raise karo.",
        "{app} mein transaction failed dikha raha hai lekin bank statement mein {amount} debit "
        "hai.",
        "Bijli ka bill {app} se bhara tha, {amount} kat gaya lekin bill abhi bhi unpaid dikha "
        "raha hai.",
        "UPI se apne hi dusre account mein {amount} bheje the, {days} din ho gaye, credit nahi "
        "hua.",
        "Reversal 48 ghante mein aana tha, ab {days} din ho gaye hain. {upi_ref}.",
        "Mera UPI kaam nahi kar raha, har baar 'declined by bank' aata hai aur ek baar {amount} "
        "kat bhi gaya.",
        "Landlord ko {payee} pe rent bheja tha {date} ko, unko mila hi nahi.",
    ),
    "Card Fraud": (
        "Card se unauthorized transaction hua hai, maine koi OTP share nahi kiya. {amount} "
        "{merchant} pe kharch hua.",
        "Mere credit card {card} se {amount} ka transaction hua jo maine nahi kiya. Card turant "
        "block karo.",
        "Kisi ne bank ke naam se call kiya aur CVV maang liya, uske baad card se {amount} kat "
        "gaya.",
        "Mera debit card mere paas hai phir bhi {city} mein ATM se {amount} nikal liye gaye.",
        "Card pe {amount} ka international transaction dikha raha hai, main kabhi bahar gaya hi "
        "nahi.",
        "Wallet kho gaya tha {date} ko, card block karne se pehle kisi ne {amount} ki shopping "
        "kar li.",
        "Mere card pe har mahine {amount2} ka subscription charge lag raha hai jo maine kabhi "
        "liya hi nahi.",
        "Fraud alert ke baad card block ho gaya, naya card abhi tak nahi aaya.",
        "Chargeback reject kar diya bola OTP se authenticate hua tha, par mujhe koi OTP aaya hi "
        "nahi tha.",
        "Petrol pump pe card swipe kiya tha, uske baad se card se chhote chhote debit ho rahe "
        "hain.",
        "Reward points wale fake link pe click kiya aur card se {amount} chale gaye.",
        "Card {card} pe {merchant} ne ek order ke liye do baar charge kiya hai. Please reverse "
        "karo.",
        "Mere card se {amount} ke gift cards kharide gaye, maine kuch nahi kharida.",
        "Metro mein tap karke {amount} ka payment ho gaya, maine card use hi nahi kiya tha.",
        "Customer care ka fake number mila tha online, unhone screen share karwaya aur card se "
        "{amount} gaye.",
    ),
    "Loan Query": (
        "Loan ki EMI do baar kat gayi is mahine, {emi} extra gaya hai. Wapas karo.",
        "Mera {loan_type} {date} ko band ho gaya par NOC abhi tak nahi mila.",
        "Bina bataye interest rate {rate} se {rate2} kar diya, ye galat hai.",
        "{big_amount} ka part payment kiya tha, par EMI ya tenure kuch kam nahi hua.",
        "Saari EMI time pe bhari hai phir bhi CIBIL mein overdue dikha raha hai.",
        "Loan {date} ko sanction ho gaya tha, disbursement abhi tak nahi hua.",
        "Recovery agent raat ko ghar pe call kar rahe hain, jabki EMI already bhar di hai.",
        "Loan ke saath {amount} ka insurance jod diya bina meri permission ke.",
        "EMI ke liye account mein balance tha phir bhi {small_amount} bounce charge laga diya.",
        "Gold loan close ho gaya par {city} branch se gehne abhi tak wapas nahi mile.",
        "Mujhe {loan_type} foreclose karna hai, statement aur charges bata dijiye.",
        "Loan band hone ke baad bhi har mahine {emi} auto debit ho raha hai.",
        "Loan close hue {months} mahine ho gaye, property ke original papers wapas nahi diye.",
        "EMI {emi} ki jagah {emi2} kat rahi hai, app mein alag dikha raha hai.",
        "Meri loan application bina reason ke reject kar di, saare documents diye the.",
    ),
    "KYC Update": (
        "Mera KYC update nahi ho raha, Aadhaar aur PAN dono {date} ko submit kar diye the.",
        "KYC pending bol ke account freeze kar diya, salary bhi credit nahi ho rahi.",
        "Video KYC teen baar disconnect ho gaya, ab app bol raha hai attempts khatam.",
        "Naya address update karna hai, main {city} shift ho gaya hoon. Address proof upload "
        "kar diya hai.",
        "PAN account se link nahi hua isliye TDS zyada kat raha hai.",
        "Aadhaar seeding ka error baar baar aa raha hai, please check karo.",
        "Branch wale bol rahe hain khud aake KYC karo, main senior citizen hoon, nahi aa sakta.",
        "Re-KYC ka message roz aa raha hai jabki maine {date} ko KYC kar diya tha.",
        "Mera naam Aadhaar mein alag aur bank mein alag hai, isliye KYC reject ho raha hai.",
        "Documents upload kiye {days} din ho gaye, abhi tak verify nahi hua.",
        "Mobile number change karna hai, purana number band ho gaya hai. Naya number {phone} hai.",
        "KYC ki wajah se account se paise nahi nikal pa raha, dawai ke liye {amount2} chahiye.",
        "Photo clear nahi hai bol ke KYC reject kar diya, nayi photo bhej di hai.",
        "Shaadi ke baad surname badalna hai, naya naam {name} hai.",
        "Mera debit card kaam nahi kar raha kyunki KYC hold laga hai, KYC update kar do.",
    ),
    "Other": (
        "Net banking login {date} se nahi ho raha, user ID lock bata raha hai.",
        "Cheque book ka request kiya tha, abhi tak ghar pe nahi aaya.",
        "Branch ka staff bahut rude tha, do ghante line mein khada rakha.",
        "ATM se cash nahi nikla par account se {amount2} kat gaya.",
        "Minimum balance maintain kiya tha phir bhi {small_amount} charge kat gaya.",
        "FD {date} ko mature ho gayi par paisa savings account mein nahi aaya.",
        "{city} branch mein passbook print karne wali machine kab se kharab hai.",
        "Customer care pe 40 minute hold pe rakha gaya, phir call kaat diya.",
        "Naya update aane ke baad se app login karte hi crash ho jata hai.",
        "{date} ko cheque jama kiya tha, {days} din ho gaye clear nahi hua.",
        "Locker nahi khul raha tha, staff bola key register nahi mil raha.",
        "SMS alert ke paise katte hain par SMS aata hi nahi.",
        "Branch working hours mein band thi, koi notice nahi tha.",
        "Account band karne ka form {date} ko diya tha, ab tak band nahi hua.",
        "Net banking aur UPI dono subah se nahi chal rahe, server down hai kya?",
    ),
}

HI_TERSE: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "upi fail ho gaya paisa kat gaya",
        "refund nahi aaya abhi tak",
        "galat upi id pe paisa chala gaya",
        "upi pending hai {date} se",
    ),
    "Card Fraud": (
        "card se paisa chala gaya, block karo",
        "card fraud hua hai mere saath",
        "mera card kisi ne use kiya hai",
        "card pe unknown charge hai",
    ),
    "Loan Query": (
        "emi do baar kat gayi",
        "noc nahi mila abhi tak",
        "loan ka interest badh gaya",
        "emi bounce charge galat hai",
    ),
    "KYC Update": (
        "kyc pending hai abhi tak",
        "kyc ho gaya phir bhi account freeze hai",
        "address update nahi hua",
        "pan link nahi ho raha",
    ),
    "Other": (
        "net banking nahi chal raha",
        "atm se cash nahi nikla",
        "cheque book nahi aayi",
        "branch staff ka behaviour kharab hai",
    ),
}

HI_DETAILS = (
    "Mera account number {acct} hai.",
    "Screenshot attach kar diya hai.",
    "Customer care ko call kiya tha, unhone bola 7 din mein ho jayega.",
    "Ye teesri baar complaint kar raha hoon.",
    "Ticket number {ticket} hai, koi reply nahi aaya.",
    "Bahut pareshani ho rahi hai.",
    "Mera registered mobile number {phone} hai.",
    "Branch gaya tha par wahan se bhi koi help nahi mili.",
    "Itne din ho gaye, koi jawab nahi aaya.",
    "Ghar ka kharcha isi account se chalta hai.",
    "Transaction ka reference {upi_ref} hai.",
    "Meri UPI ID {upi_id} hai.",
)

HI_OPENERS = ("Namaste,", "Sir,", "Hello sir,", "Hi team,", "Respected sir/madam,", "Dear sir,")
HI_CLOSERS = (
    "Jaldi solve karo please.",
    "Kripya jaldi madad karein.",
    "Dhanyavaad.",
    "Please help karo.",
    "Please jaldi dekh lijiye.",
    "Thank you, {name}",
)
HI_CONTEXTS = (
    "Main {years} saal se {bank} ka customer hoon.",
    "Main {city} mein rehta hoon aur meri home branch wahi hai.",
    "Main senior citizen hoon, app chalana zyada nahi aata.",
    "Meri mummy ki taraf se likh raha hoon.",
)
HI_DISTRACTORS = (
    "Mera loan ka EMI theek kat raha hai, wo problem nahi hai.",
    "KYC already update hai mera.",
    "Card bhi hai mere paas par usme koi dikkat nahi hai.",
    "UPI baaki sab jagah chal raha hai.",
)


@dataclass(frozen=True)
class _Phrasebook:
    """Every phrase list for one language."""

    cores: Mapping[str, tuple[str, ...]]
    terse: Mapping[str, tuple[str, ...]]
    details: Mapping[str, tuple[str, ...]]
    generic_details: tuple[str, ...]
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    contexts: tuple[str, ...]
    distractors: tuple[str, ...]


_PHRASEBOOKS: dict[str, _Phrasebook] = {
    "en": _Phrasebook(
        EN_CORES,
        EN_TERSE,
        EN_DETAILS,
        EN_GENERIC_DETAILS,
        EN_OPENERS,
        EN_CLOSERS,
        EN_CONTEXTS,
        EN_DISTRACTORS,
    ),
    "hi-en": _Phrasebook(
        HI_CORES,
        HI_TERSE,
        {desk: () for desk in DESKS},
        HI_DETAILS,
        HI_OPENERS,
        HI_CLOSERS,
        HI_CONTEXTS,
        HI_DISTRACTORS,
    ),
}

# Underspecified complaints: the text fits several desks, and the desk it was routed to was
# decided by something the text does not say (the account it came from, an earlier ticket). They
# keep any model honest: the weights are how often each desk gets such a complaint.
_ALL_DESKS = dict.fromkeys(DESKS, 1.0)
VAGUE_CORES: dict[str, tuple[tuple[str, Mapping[str, float]], ...]] = {
    "en": (
        (
            "Amount of {amount} was debited from my account {acct} on {date} but the transaction "
            "failed. Please refund.",
            {"UPI Dispute": 5, "Card Fraud": 2, "Other": 2},
        ),
        (
            "There is a debit of {amount} on {date} that I do not recognise. Please check and "
            "reverse it.",
            {"Card Fraud": 5, "UPI Dispute": 3, "Loan Query": 1, "Other": 1},
        ),
        (
            "My account has been blocked since {date} and I cannot make any transactions.",
            {"KYC Update": 5, "Card Fraud": 2, "Other": 2},
        ),
        (
            "Refund of {amount} has not been received yet; it has been {days} days.",
            {"UPI Dispute": 5, "Card Fraud": 4},
        ),
        (
            "Charges of {small_amount} were deducted from my account on {date} without any "
            "information.",
            {"Other": 5, "Loan Query": 3, "Card Fraud": 2},
        ),
        (
            "Please update my details in the account; I submitted the documents on {date}.",
            {"KYC Update": 6, "Other": 2, "Loan Query": 1},
        ),
        (
            "Double debit of {amount} on {date}, kindly reverse the extra one.",
            {"UPI Dispute": 4, "Card Fraud": 3, "Loan Query": 3},
        ),
        ("Nobody is responding to my complaint {ticket} raised on {date}.", _ALL_DESKS),
        (
            "I got an OTP that I did not ask for and then {amount} was gone from my account.",
            {"Card Fraud": 5, "UPI Dispute": 4},
        ),
        (
            "The auto debit of {amount} failed on {date} but a penalty was still charged.",
            {"Loan Query": 5, "Other": 2, "UPI Dispute": 2},
        ),
        (
            "Money debited, not credited to the other side. {amount}, {date}.",
            {"UPI Dispute": 6, "Other": 2, "Card Fraud": 1},
        ),
        (
            "I want to know why {amount} was deducted from my account on {date}.",
            {"Loan Query": 3, "Other": 3, "Card Fraud": 2, "UPI Dispute": 2},
        ),
        (
            "My request submitted at the branch on {date} is still pending.",
            {"KYC Update": 4, "Other": 4, "Loan Query": 2},
        ),
        (
            "Transaction declined but amount deducted, {amount}.",
            {"UPI Dispute": 4, "Card Fraud": 4, "Other": 2},
        ),
        (
            "I was told my issue would be solved in 7 working days; it is now {days} days.",
            _ALL_DESKS,
        ),
        (
            "Please call me back about the deduction of {amount} on {date}; my number is {phone}.",
            {"UPI Dispute": 1, "Card Fraud": 1, "Loan Query": 1, "Other": 1},
        ),
    ),
    "hi-en": (
        (
            "Account se {amount} kat gaya par transaction fail ho gaya tha.",
            {"UPI Dispute": 5, "Card Fraud": 2, "Other": 2},
        ),
        (
            "Mera account {date} se block hai, koi transaction nahi ho raha.",
            {"KYC Update": 5, "Card Fraud": 2, "Other": 2},
        ),
        ("Refund abhi tak nahi aaya, {days} din ho gaye.", {"UPI Dispute": 5, "Card Fraud": 4}),
        (
            "Bina bataye {small_amount} ka charge kat gaya.",
            {"Other": 5, "Loan Query": 3, "Card Fraud": 2},
        ),
        ("Complaint {ticket} ka koi jawab nahi aaya abhi tak.", _ALL_DESKS),
        (
            "{amount} do baar kat gaya, ek wapas karo.",
            {"UPI Dispute": 4, "Card Fraud": 3, "Loan Query": 3},
        ),
        (
            "Ye {amount} kis cheez ka kata hai, samajh nahi aa raha.",
            {"Loan Query": 3, "Other": 3, "Card Fraud": 2, "UPI Dispute": 2},
        ),
    ),
}

# ---------------------------------------------------------------------------------------------
# Twins: groups with one bag of words and different desks.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SwapPattern:
    """Entity phrases trade places between roles {A}, {B} (and {C}); one role decides the desk."""

    template: str
    decisive: str  # the role ("A", "B" or "C") whose entity a reader routes the complaint by
    entities: Mapping[str, tuple[str, ...]]  # desk -> phrases that fit every role
    size: int = 2
    language: str = "en"


@dataclass(frozen=True)
class _FixedPattern:
    """Members written out in full (a moved negation); slots are shared by all members."""

    members: tuple[tuple[str, str], ...]  # (template, desk)
    language: str = "en"


_UPI, _CARD, _LOAN, _KYC, _OTHER = DESKS

TWIN_PATTERNS: tuple[_SwapPattern | _FixedPattern, ...] = (
    _SwapPattern(
        "I paid {amount} to {merchant} on {date} by {A}, not by {B}, and was charged twice.",
        "A",
        {_UPI: ("UPI", "{app} UPI"), _CARD: ("card", "credit card", "debit card")},
    ),
    _SwapPattern(
        "I entered my PIN only for the {A} payment, not for the {B} payment of {amount} at "
        "{merchant} on {date}.",
        "B",
        {_UPI: ("UPI",), _CARD: ("card", "credit card")},
    ),
    _SwapPattern(
        "My {A} is not the problem; my {B} was put on hold by {bank} on {date}. Please sort it "
        "out.",
        "B",
        {_CARD: ("debit card", "credit card"), _KYC: ("KYC", "KYC status"), _UPI: ("UPI ID",)},
    ),
    _SwapPattern(
        "I received the {A} but not the {B}, even though {bank} confirmed both on {date}.",
        "B",
        {
            _UPI: ("UPI refund of {amount}", "UPI reversal"),
            _LOAN: ("loan closure NOC", "loan interest certificate"),
            _CARD: ("chargeback credit for the card fraud",),
            _OTHER: ("new cheque book", "FD maturity amount"),
            _KYC: ("KYC verification confirmation",),
        },
    ),
    _SwapPattern(
        "The {A} team at {bank} told me to contact the {B} team about the {amount} debit on "
        "{date}.",
        "B",
        {_UPI: ("UPI",), _CARD: ("card fraud",), _LOAN: ("loan",), _KYC: ("KYC",)},
    ),
    _SwapPattern(
        "I asked the {city} branch for help with my {A}, but they only talked about my {B}.",
        "A",
        {
            _UPI: ("failed UPI payment", "UPI refund"),
            _CARD: ("stolen credit card", "card fraud complaint"),
            _LOAN: ("home loan EMI", "loan foreclosure"),
            _KYC: ("pending KYC", "address update for KYC"),
            _OTHER: ("net banking login", "cheque book request"),
        },
    ),
    _SwapPattern(
        "After the {A} problem was fixed on {date}, a new {B} problem started and nobody is "
        "helping.",
        "B",
        {
            _UPI: ("UPI payment",),
            _CARD: ("card fraud",),
            _LOAN: ("loan EMI",),
            _KYC: ("KYC",),
            _OTHER: ("net banking",),
        },
    ),
    _SwapPattern(
        "Not my {A}, not my {B}: it is my {C} that has had a problem since {date}.",
        "C",
        {
            _UPI: ("UPI ID",),
            _CARD: ("credit card",),
            _LOAN: ("loan account",),
            _KYC: ("KYC",),
            _OTHER: ("cheque book",),
        },
        size=3,
    ),
    _SwapPattern(
        "Please fix my {A} first; the {B} can wait until next week. Account {acct}.",
        "A",
        {
            _UPI: ("UPI refund of {amount}",),
            _CARD: ("blocked credit card after the fraud",),
            _LOAN: ("loan statement",),
            _KYC: ("KYC update",),
            _OTHER: ("cheque book request",),
        },
    ),
    _SwapPattern(
        "My {A} complaint is still open, the {B} one was closed on {date}. Ticket {ticket}.",
        "A",
        {
            _UPI: ("UPI refund",),
            _CARD: ("card fraud",),
            _LOAN: ("loan EMI",),
            _KYC: ("KYC update",),
            _OTHER: ("ATM cash",),
        },
    ),
    _SwapPattern(
        "Mera {A} block nahi hua, {B} block hua hai {date} se. {bank} se koi jawab nahi aaya.",
        "B",
        {_CARD: ("card",), _KYC: ("KYC",), _UPI: ("UPI ID",), _OTHER: ("net banking",)},
        language="hi-en",
    ),
    _SwapPattern(
        "{A} ki problem nahi hai, problem {B} ki hai. {bank} ne {date} se kuch nahi kiya.",
        "B",
        {
            _UPI: ("UPI refund",),
            _LOAN: ("loan EMI",),
            _KYC: ("KYC",),
            _CARD: ("card fraud",),
            _OTHER: ("cheque book",),
        },
        language="hi-en",
    ),
    _FixedPattern(
        (
            (
                "I did not authorise the card payment of {amount} at {merchant}; the UPI transfer "
                "on {date} I did authorise.",
                _CARD,
            ),
            (
                "I did authorise the card payment of {amount} at {merchant}; the UPI transfer on "
                "{date} I did not authorise.",
                _UPI,
            ),
        )
    ),
    _FixedPattern(
        (
            (
                "My loan application at {bank} is approved but my KYC verification is not "
                "complete, as of {date}.",
                _KYC,
            ),
            (
                "My loan application at {bank} is not approved but my KYC verification is "
                "complete, as of {date}.",
                _LOAN,
            ),
        )
    ),
    _FixedPattern(
        (
            (
                "My EMI auto-debit of {emi} did go through on {date} but the UPI refund of "
                "{amount} did not.",
                _UPI,
            ),
            (
                "My EMI auto-debit of {emi} did not go through on {date} but the UPI refund of "
                "{amount} did.",
                _LOAN,
            ),
        )
    ),
    _FixedPattern(
        (
            (
                "At the {city} branch my cheque book request is done but my KYC update is not.",
                _KYC,
            ),
            (
                "At the {city} branch my cheque book request is not done but my KYC update is.",
                _OTHER,
            ),
        )
    ),
    _FixedPattern(
        (
            (
                "The card transaction of {amount} at {merchant} was genuine; the UPI one on "
                "{date} was not.",
                _UPI,
            ),
            (
                "The card transaction of {amount} at {merchant} was not genuine; the UPI one on "
                "{date} was.",
                _CARD,
            ),
        )
    ),
    _FixedPattern(
        (
            (
                "The {amount} charge on my credit card is known to me; the loan EMI debit of "
                "{emi} on {date} is not.",
                _LOAN,
            ),
            (
                "The {amount} charge on my credit card is not known to me; the loan EMI debit of "
                "{emi} on {date} is.",
                _CARD,
            ),
        )
    ),
    _FixedPattern(
        (
            ("Since {date} net banking is working but UPI is not, on my {bank} account.", _UPI),
            ("Since {date} net banking is not working but UPI is, on my {bank} account.", _OTHER),
        )
    ),
    _FixedPattern(
        (
            (
                "{date} ko card wala transaction {amount} ka maine kiya tha, UPI wala nahi kiya.",
                _UPI,
            ),
            (
                "{date} ko card wala transaction {amount} ka maine nahi kiya tha, UPI wala kiya.",
                _CARD,
            ),
        ),
        language="hi-en",
    ),
    _FixedPattern(
        (
            ("Mera loan approve ho gaya hai, KYC verify nahi hua hai. {bank}, {city}.", _KYC),
            ("Mera loan approve nahi hua hai, KYC verify ho gaya hai. {bank}, {city}.", _LOAN),
        ),
        language="hi-en",
    ),
)


@dataclass(frozen=True)
class _Row:
    """One generated complaint before ids are assigned."""

    channel: str
    language: str
    text: str
    desk: str
    slice: str = "regular"
    twin_group: int | None = None


def _swap_members(pattern: _SwapPattern, rng: random.Random) -> list[tuple[str, str]]:
    """Rotate `size` entities of different desks through the roles; returns (template, desk)."""
    desks = rng.sample(sorted(pattern.entities), pattern.size)
    phrases = [rng.choice(pattern.entities[desk]) for desk in desks]
    roles = "ABC"[: pattern.size]
    members = []
    for shift in range(pattern.size):
        order = [(i + shift) % pattern.size for i in range(pattern.size)]
        template = pattern.template
        for role, index in zip(roles, order, strict=True):
            template = template.replace("{" + role + "}", phrases[index])
        members.append((template, desks[order[roles.index(pattern.decisive)]]))
    return members


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _twin_frame(language: str, rng: random.Random) -> tuple[str, str]:
    """An opener and closer shared by every member of a group (bags stay equal)."""
    book = _PHRASEBOOKS[language]
    opener = rng.choice(book.openers) + " " if rng.random() < 0.35 else ""
    closer = " " + rng.choice(book.closers) if rng.random() < 0.4 else ""
    return opener, closer


def _twin_group(pattern: _SwapPattern | _FixedPattern, rng: random.Random) -> list[tuple[str, str]]:
    """One group of (text, desk) twins, checked to share a bag of words and differ in desk."""
    if isinstance(pattern, _SwapPattern):
        members = _swap_members(pattern, rng)
    else:
        members = list(pattern.members)
    opener, closer = _twin_frame(pattern.language, rng)
    slots = _Slots(rng)
    group = [(_fill(opener + _capitalise(t) + closer, slots), desk) for t, desk in members]
    _check_twins(group)
    return group


def _check_twins(group: Sequence[tuple[str, str]]) -> None:
    """The twin guarantee: one bag of words, distinct texts, at least two desks."""
    texts = [text for text, _ in group]
    if len({bag_key(text) for text in texts}) != 1:
        raise RuntimeError(f"twin members differ in their bag of words: {texts}")
    if len(set(texts)) != len(texts) or len({desk for _, desk in group}) < 2:
        raise RuntimeError(f"twin members must differ in text and span two desks: {group}")


def _make_twins(count: int, rng: random.Random, *, languages: Sequence[str]) -> list[_Row]:
    """About `count` twin rows in groups of two or three (never a group of one)."""
    patterns = [p for p in TWIN_PATTERNS if p.language in languages]
    rows: list[_Row] = []
    seen: set[str] = set()
    group_id = attempts = 0
    while count - len(rows) >= 2:
        attempts += 1
        if attempts > 50 * count:
            raise RuntimeError("could not draw enough distinct twin groups; lower twin_share")
        fitting = [p for p in patterns if _pattern_size(p) <= count - len(rows)]
        pattern = rng.choice(fitting)
        group = _twin_group(pattern, rng)
        if any(text in seen for text, _ in group):
            continue  # a repeat of an earlier group: draw again
        group_id += 1
        for text, desk in group:
            seen.add(text)
            channel = _channel("medium", rng)
            rows.append(_Row(channel, pattern.language, text, desk, "twin", group_id))
    return rows


def _pattern_size(pattern: _SwapPattern | _FixedPattern) -> int:
    return pattern.size if isinstance(pattern, _SwapPattern) else len(pattern.members)


# ---------------------------------------------------------------------------------------------
# Regular complaints.
# ---------------------------------------------------------------------------------------------

_STYLES = ("terse", "short", "medium", "long")
_STYLE_WEIGHTS = (0.08, 0.30, 0.42, 0.20)
_LONG_WORDS = 60  # a "long" complaint rambles on until it has at least this many words
_CHANNEL_WEIGHTS = {  # email, app, chat, branch: terse texts come from chat, long from email
    "terse": (0.05, 0.45, 0.45, 0.05),
    "short": (0.25, 0.35, 0.30, 0.10),
    "medium": (0.40, 0.25, 0.15, 0.20),
    "long": (0.60, 0.10, 0.05, 0.25),
}
_TYPO_SHARE = 0.08
_VAGUE_SHARE = 0.12
_REPHRASE_CHANCE = 0.2
_REPHRASINGS = {  # whole-phrase swaps that keep the sense, each tried once per English text
    "debited": ("deducted", "taken"),
    "deducted": ("debited", "cut"),
    "please": ("kindly", "pls"),
    "Please": ("Kindly", "Pls"),
    "immediately": ("urgently", "right away"),
    "account": ("a/c", "acct"),
    "transaction": ("txn",),
    "did not": ("didn't",),
    "I have": ("I've",),
    "customer care": ("customer support", "the helpline"),
    "money": ("amount", "funds"),
}
_MISSPELLINGS = {
    "received": "recieved",
    "amount": "amout",
    "account": "acount",
    "please": "pls",
    "transaction": "transcation",
    "immediately": "immediatly",
    "deducted": "deductd",
    "refund": "refnd",
    "because": "becuase",
    "money": "mony",
    "payment": "paymnet",
    "already": "allready",
    "credited": "creditted",
    "debited": "debitted",
    "still": "stil",
    "update": "updte",
}


def _channel(style: str, rng: random.Random) -> str:
    return rng.choices(CHANNELS, weights=_CHANNEL_WEIGHTS[style])[0]


def _maybe(phrases: Sequence[str], probability: float, rng: random.Random) -> list[str]:
    """One phrase with the given probability, else none."""
    return [rng.choice(phrases)] if rng.random() < probability else []


def _misspell(word: str, rng: random.Random) -> str:
    """A common misspelling, or two neighbouring letters swapped."""
    if word in _MISSPELLINGS:
        return _MISSPELLINGS[word]
    i = rng.randrange(1, len(word) - 2)
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def _add_typos(text: str, rng: random.Random) -> str:
    """Misspell one or two ordinary lower-case words (never numbers, names or acronyms)."""
    spans = [s for s in word_spans(text) if s.text.isalpha() and s.text.islower()]
    spans = [s for s in spans if len(s.text) >= 5]
    chosen = rng.sample(spans, min(len(spans), rng.randint(1, 2)))
    for span in sorted(chosen, key=lambda s: s.start, reverse=True):
        text = text[: span.start] + _misspell(span.text, rng) + text[span.end :]
    return text


def _compose(style: str, book: _Phrasebook, desk: str, rng: random.Random) -> list[str]:
    """The templates of one complaint in reading order: opener, body, closer."""
    core = rng.choice(book.cores[desk])
    if style == "short":
        return [core, *_maybe(book.closers, 0.3, rng)]
    is_long = style == "long"
    pool = [*book.details[desk], *book.generic_details]
    details = rng.sample(pool, 1 if not is_long else rng.randint(2, 3))
    context = _maybe(book.contexts, 0.6 if is_long else 0.2, rng)
    body = [core, *details, *_maybe(book.distractors, 0.4 if is_long else 0.2, rng)]
    body = [*context, *body] if rng.random() < 0.5 else [*body, *context]
    opener = _maybe(book.openers, 0.9 if is_long else 0.55, rng)
    return [*opener, *body, *_maybe(book.closers, 0.9 if is_long else 0.65, rng)]


def _ramble(parts: list[str], book: _Phrasebook, desk: str, rng: random.Random) -> list[str]:
    """Extra detail sentences before the closer, for complaints that go on and on."""
    spare = [p for p in (*book.details[desk], *book.generic_details) if p not in parts]
    rng.shuffle(spare)
    return parts[:-1] + spare[:4] + parts[-1:]


def _vague_text(desk: str, language: str, rng: random.Random) -> str:
    """An underspecified complaint that was routed to `desk` (see VAGUE_CORES)."""
    options = [(template, weights.get(desk, 0)) for template, weights in VAGUE_CORES[language]]
    options = [(template, weight) for template, weight in options if weight > 0]
    template = rng.choices([t for t, _ in options], weights=[w for _, w in options])[0]
    book = _PHRASEBOOKS[language]
    parts = [
        *_maybe(book.openers, 0.4, rng),
        template,
        *_maybe(book.generic_details, 0.4, rng),
        *_maybe(book.closers, 0.5, rng),
    ]
    slots = _Slots(rng)
    return " ".join(_fill(part, slots) for part in parts)


def _rephrase(text: str, rng: random.Random) -> str:
    """Swap a few stock phrases for their variants, as different writers would."""
    for old, variants in _REPHRASINGS.items():
        if old in text and rng.random() < _REPHRASE_CHANCE:
            text = re.sub(rf"\b{re.escape(old)}\b", rng.choice(variants), text)
    return text


def _regular_text(desk: str, language: str, style: str, rng: random.Random) -> str:
    """One regular complaint of the given desk, language and style."""
    book = _PHRASEBOOKS[language]
    slots = _Slots(rng)
    if style == "terse":
        return _fill(rng.choice(book.terse[desk]), slots)
    parts = _compose(style, book, desk, rng)
    text = " ".join(_fill(part, slots) for part in parts)
    if style == "long" and len(words(text)) < _LONG_WORDS:
        text = " ".join(_fill(part, slots) for part in _ramble(parts, book, desk, rng))
    return text


def _regular_row(desk: str, language: str, taken: set[str], rng: random.Random) -> _Row:
    """A regular row whose text is new (never a twin's text; repeats of terse texts allowed)."""
    for attempt in range(50):
        if rng.random() < _VAGUE_SHARE:
            style, text = "short", _vague_text(desk, language, rng)
        else:
            style = rng.choices(_STYLES, weights=_STYLE_WEIGHTS)[0]
            text = _regular_text(desk, language, style, rng)
        if language == "en":
            text = _rephrase(text, rng)
        if language == "en" and rng.random() < _TYPO_SHARE:
            text = _add_typos(text, rng)
        channel = _channel(style, rng)
        if channel == "chat" and rng.random() < 0.4:
            text = text.lower()
        if text not in taken or attempt >= 10:
            return _Row(channel, language, text, desk)
    raise RuntimeError(f"could not write a new {desk} complaint")


def _apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Split `total` in proportion to `weights` (largest remainder, ties to the first)."""
    scale = sum(weights)
    exact = [total * w / scale for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: counts[i] - exact[i])
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _regular_desks(rows: int, twins: Sequence[_Row]) -> list[str]:
    """Desks for the regular rows so that the whole data set follows the desk weights."""
    target = _apportion(rows, _DESK_WEIGHTS)
    in_twins = Counter(row.desk for row in twins)
    need = [max(0, t - in_twins[desk]) for t, desk in zip(target, DESKS, strict=True)]
    counts = _apportion(rows - len(twins), need if sum(need) else _DESK_WEIGHTS)
    return [desk for desk, count in zip(DESKS, counts, strict=True) for _ in range(count)]


def _make_regular(config: DemoConfig, twins: Sequence[_Row], rng: random.Random) -> list[_Row]:
    """The regular rows: desks to the desk weights, a share of them code-mixed."""
    desks = _regular_desks(config.rows, twins)
    twin_hi = sum(row.language == "hi-en" for row in twins)
    hi_count = min(len(desks), max(0, round(config.rows * config.codemix_share) - twin_hi))
    hi_rows = set(rng.sample(range(len(desks)), hi_count))
    twin_texts = {row.text for row in twins}
    taken = set(twin_texts)
    rows = []
    for i, desk in enumerate(desks):
        row = _regular_row(desk, "hi-en" if i in hi_rows else "en", taken, rng)
        if row.text in twin_texts:
            raise RuntimeError("a regular complaint came out equal to a twin; change the seed")
        taken.add(row.text)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Assembly.
# ---------------------------------------------------------------------------------------------


def _same_group(a: _Row, b: _Row) -> bool:
    return a.twin_group is not None and a.twin_group == b.twin_group


def _can_take(rows: Sequence[_Row], k: int, i: int) -> bool:
    """Whether the regular row at `k` may trade places with the twin at `i`."""
    if abs(k - i) < 2 or rows[k].slice != "regular":
        return False
    neighbours = [rows[j] for j in (k - 1, k + 1) if 0 <= j < len(rows)]
    return not any(_same_group(rows[i], row) for row in neighbours)


def _separate_twins(rows: list[_Row]) -> list[_Row]:
    """Move twins apart so no two members of a group sit next to each other."""
    rows = list(rows)
    for i in range(1, len(rows)):
        if _same_group(rows[i - 1], rows[i]):
            k = next((k for k in range(len(rows)) if _can_take(rows, k, i)), None)
            if k is not None:  # None only when nearly every row is a twin
                rows[i], rows[k] = rows[k], rows[i]
    return rows


def _frame(rows: Sequence[_Row]) -> pd.DataFrame:
    """The data set as a DataFrame with the public columns, ids in row order."""
    frame = pd.DataFrame(
        {
            "complaint_id": [f"GL-{i:06d}" for i in range(1, len(rows) + 1)],
            "channel": [row.channel for row in rows],
            "language": [row.language for row in rows],
            "text": [row.text for row in rows],
            "desk": [row.desk for row in rows],
            "slice": [row.slice for row in rows],
            "twin_group": pd.array([row.twin_group for row in rows], dtype="Int64"),
        }
    )
    return frame[list(COLUMNS)]


def _is_whole(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _validate(config: DemoConfig) -> None:
    if not isinstance(config, DemoConfig):
        raise ValueError(f"config must be a DemoConfig, got {type(config).__name__}")
    if not _is_whole(config.rows) or config.rows < 50:
        raise ValueError(f"rows must be a whole number of at least 50, got {config.rows!r}")
    if not _is_whole(config.seed):
        raise ValueError(f"seed must be a whole number, got {config.seed!r}")
    for name in ("twin_share", "codemix_share"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, Real) or not 0 <= value <= 0.5:
            raise ValueError(f"{name} must be a number between 0 and 0.5, got {value!r}")


def _normalised(config: DemoConfig) -> DemoConfig:
    """Plain Python numbers (numpy integers seed `random` differently or not at all)."""
    return replace(
        config,
        rows=int(config.rows),
        seed=int(config.seed),
        twin_share=float(config.twin_share),
        codemix_share=float(config.codemix_share),
    )


def generate_demo_data(config: DemoConfig = DemoConfig()) -> pd.DataFrame:
    """Generate the demo grievance data set; the same config always gives the same rows.

    Parameters
    ----------
    config : DemoConfig
        Row count, seed, and the shares of twin and code-mixed rows.

    Returns
    -------
    pandas.DataFrame
        `(config.rows, 7)` with columns `complaint_id, channel, language, text, desk, slice,
        twin_group`, shuffled. `slice` is "twin" for rows in a twin group and "regular"
        otherwise; `twin_group` (nullable Int64) is the group id of a twin and NA otherwise.
        Every twin group has one bag of words (`core.text.bag_key`) and at least two desks.
    """
    _validate(config)
    config = _normalised(config)
    rng = random.Random(config.seed)  # local: the global random state is never touched
    languages = ("en", "hi-en") if config.codemix_share > 0 else ("en",)
    twins = _make_twins(round(config.rows * config.twin_share), rng, languages=languages)
    rows = twins + _make_regular(config, twins, rng)
    rng.shuffle(rows)
    return _frame(_separate_twins(rows))


# ---------------------------------------------------------------------------------------------
# Writing.
# ---------------------------------------------------------------------------------------------


class _FixedTimeZip(zipfile.ZipFile):
    """A zip whose entries all carry one fixed timestamp, so equal content gives equal bytes."""

    def writestr(self, zinfo_or_arcname, data, compress_type=None, compresslevel=None):
        if isinstance(zinfo_or_arcname, str):
            info = zipfile.ZipInfo(zinfo_or_arcname, date_time=_FIXED_TIME.timetuple()[:6])
            info.compress_type = self.compression
            info.external_attr = 0o600 << 16
            zinfo_or_arcname = info
        super().writestr(zinfo_or_arcname, data, compress_type, compresslevel)

    def write(self, filename, arcname=None, compress_type=None, compresslevel=None):
        # openpyxl streams each worksheet through a temporary file, whose mtime would leak in.
        data = Path(filename).read_bytes()
        self.writestr(arcname or Path(filename).name, data, compress_type, compresslevel)


def _csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")


def _xlsx_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as one XLSX sheet with fixed document times, so the bytes are reproducible."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "complaints"
    sheet.append(list(frame.columns))
    for values in frame.astype(object).itertuples(index=False):
        sheet.append([None if pd.isna(v) else v for v in values])
    workbook.properties.created = workbook.properties.modified = _FIXED_TIME
    buffer = io.BytesIO()
    # openpyxl's save_workbook stamps "now" into the file; its ExcelWriter does not.
    with _FixedTimeZip(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        ExcelWriter(workbook, archive).save()
    return buffer.getvalue()


def _write_atomically(target: Path, payload: bytes) -> None:
    """Write to a temporary file beside `target`, then rename: a failure leaves nothing."""
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_demo_data(path: str | Path, config: DemoConfig = DemoConfig()) -> Path:
    """Generate the demo data and write it to `path` as CSV (UTF-8, no index) or XLSX.

    The format follows the suffix. The file appears whole or not at all.

    Returns
    -------
    Path
        The path written.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in (".csv", ".xlsx"):
        raise ValueError(f"cannot write demo data to {target.name!r}: use .csv or .xlsx")
    if not target.parent.is_dir():
        raise ValueError(f"folder {target.parent} does not exist: create it first")
    frame = generate_demo_data(config)
    _write_atomically(target, _csv_bytes(frame) if suffix == ".csv" else _xlsx_bytes(frame))
    return target
